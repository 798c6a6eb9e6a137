"""Donation that took effect (issue 24, the fix measured): the bytes of donated inputs each jitted
call consumed and XLA aliased to its outputs, read by the probe from the compiled program and the
call, summed per run, per step and per line of the user's code.

The first tests read HLO header lines and hand-written streams; the slow ones run tiny scripts in
the sandbox, with and without `donate_argnums`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxmem.evaluators.verify import probe
from jaxmem.evaluators.verify.attribution import parse, summarize
from jaxmem.evaluators.verify.runner import _disagreement

NONCE = "cd" * 16


def m(body: str) -> str:
    return probe.marker(NONCE, body)


# ---- what a compiled module aliases ----------------------------------------------------------------
@pytest.mark.parametrize(("header", "expected"), [
    # jax.jit(f, donate_argnums=0) on one f32[100] parameter, the other not donated
    ("HloModule jit_f, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias) }, "
     "entry_computation_layout={(f32[100]{0}, f32[50]{0})->(f32[100]{0}, f32[])}, allow_spmd", {0: 400}),
    # a single output aliased ({} is the whole output), one device's share of a sharded array
    ("HloModule jit__lambda, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }, "
     "entry_computation_layout={(f32[4,1000]{1,0})->f32[4,1000]{1,0}}, num_partitions=2", {0: 16000}),
    # a pytree of small types, both leaves aliased
    ("HloModule jit__lambda, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, "
     "entry_computation_layout={(bf16[3]{0}, s8[2,2]{1,0})->(bf16[3]{0}, s8[2,2]{1,0})}", {0: 6, 1: 4}),
    # scalars, tiled layouts and a tuple parameter aliased by index
    ("HloModule m, input_output_alias={ {0}: (1, {1}, may-alias) }, "
     "entry_computation_layout={(s32[], (f32[8,128]{1,0:T(8,128)}, f64[10]{0}))->(f64[10]{0})}", {1: 80}),
    # nothing donated, or a header this reader does not know
    ("HloModule jit_f, entry_computation_layout={(f32[100]{0})->f32[100]{0}}", {}),
    ("HloModule jit_f, input_output_alias={ {0}: (0, {}, may-alias) }", {}),
    ("not an HLO module", {}),
])
def test_aliased_parameters_and_their_bytes_come_from_the_module_header(header: str, expected: dict):
    assert probe.aliased_params(header + "\n\nENTRY main { ... }\n") == expected


def test_aliased_bytes_match_xlas_own_memory_analysis():
    """The bytes read from the header are what `memory_analysis().alias_size_in_bytes` says (the
    number the verifier's buffer-donation pair measures), per device. In a child process: JAX's
    threads in this one would make every later fork of the test session unsafe."""
    code = textwrap.dedent("""\
        import importlib.util, json, sys
        from functools import partial
        import jax, jax.numpy as jnp
        spec = importlib.util.spec_from_file_location("probe", sys.argv[1])
        probe = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(probe)

        @partial(jax.jit, donate_argnums=(0, 1))
        def step(params, opt, x):
            return jax.tree.map(lambda p: p * 0.9 + x.sum(), params), opt + 1

        params = {"w": jnp.zeros((64, 32)), "b": jnp.zeros(32, jnp.bfloat16)}
        compiled = step.lower(params, jnp.zeros(7, jnp.int32), jnp.ones(3)).compile()
        found = probe.aliased_params(compiled.runtime_executable().hlo_modules()[0].to_string())
        print(json.dumps([sorted(found.values()), compiled.memory_analysis().alias_size_in_bytes]))
        """)
    out = subprocess.run([sys.executable, "-c", code, probe.__file__], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    found, xla = json.loads(out.stdout.strip().splitlines()[-1])
    # "b" comes back as float32 (bfloat16 + float32): no output of its type, so it cannot alias.
    assert sum(found) == xla == 64 * 32 * 4 + 7 * 4
    assert found == [7 * 4, 64 * 32 * 4]


# ---- the stream ------------------------------------------------------------------------------------
def test_aliased_calls_go_on_their_line_per_step_with_their_bytes():
    text = "\n".join([m(probe.BEGIN), m("d:1:12:/p/train.py"), m("d:2:11:/p/train.py"),
                      *[m(f"a:7:1.1|2.1.{k}:4000::jit_step") for k in range(1, 11)],
                      m("l:2:1:10"), m(probe.END)])
    s = parse(text, NONCE)
    assert s.problems == [] and s.markers["a"] == 10
    summary = summarize(s)
    row = next(r for r in summary["lines"] if r["line"] == 12)["metrics"]["aliased_calls"]
    assert (row["total"], row["first_step"], row["steady_total"], row["per_step"]) == (10, 1, 9, 1.0)
    assert row["bytes"] == 40000 and row["how"] == {"jit_step": 10}
    assert summary["totals"] == {"aliased_calls": 10}
    result = {"host_syncs": [], "attribution": {"syncs": 0, "compiles": 0, "aliased_calls": 10,
                                                "aliased_bytes": 40000},
              "aliased": {"calls": 10, "bytes": 40000, "max_call_bytes": 4000}}
    assert _disagreement(s, result) == []


@pytest.mark.parametrize("change", [
    {"aliased": {"calls": 10, "bytes": 80000}},                        # bytes raised in memory
    {"aliased": {"calls": 9, "bytes": 36000}},                         # fewer than the markers
    {"aliased": {"calls": 12, "bytes": 40000}},                        # more calls, no more bytes
    {"attribution": {"syncs": 0, "compiles": 0, "aliased_calls": 10, "aliased_bytes": 4}},
])
def test_alias_counts_that_do_not_add_up_to_the_markers_are_tampering(change: dict):
    text = "\n".join([m(probe.BEGIN), m("d:1:12:/p/train.py"),
                      *[m("a:7:1.1|:4000::jit_step") for _ in range(10)], m(probe.END)])
    result = {"host_syncs": [], "attribution": {"syncs": 0, "compiles": 0, "aliased_calls": 10,
                                                "aliased_bytes": 40000},
              "aliased": {"calls": 10, "bytes": 40000, "max_call_bytes": 4000}, **change}
    assert _disagreement(parse(text, NONCE), result)


def test_a_malformed_alias_marker_is_a_problem():
    s = parse("\n".join([m(probe.BEGIN), m("a:7:1.1|:lots::jit_step"), m(probe.END)]), NONCE)
    assert "a malformed marker appeared on file descriptor 2" in s.problems


# ---- real runs ---------------------------------------------------------------------------------------
LOOP = """\
from functools import partial

import numpy as np
import jax
import jax.numpy as jnp

@{jit}
def step(i, state, x):
    return state * 0.9 + x + i

state = jnp.zeros(1000)
xs = np.ones(1000, np.float32)
for i in range(20):
    state = step(i, state, xs)
print(float(state.sum()))
"""


@pytest.mark.slow
def test_a_loop_with_and_without_donate_argnums(tmp_path: Path, capsys):
    """Without donation no bytes are aliased; with it each of the 20 calls aliases the 4,000-byte
    state, on the line of the call, one per step. Nothing else the run counts changes (the
    donating program runs through JAX's Python dispatch in the probe, not its C++ fast path)."""
    from jaxmem.evaluators.verify.api import verify_script

    results = {}
    for name, jit in (("plain", "jax.jit"), ("donating", "partial(jax.jit, donate_argnums=1)")):
        (tmp_path / f"{name}.py").write_text(LOOP.format(jit=jit))
        results[name] = verify_script(str(tmp_path / f"{name}.py"))
    plain, donating = results["plain"], results["donating"]
    assert plain["ok"] and donating["ok"] and not plain["tampered"] and not donating["tampered"]
    assert (plain["alias_bytes"], plain["aliased_calls"]) == (0, 0)
    assert (donating["alias_bytes"], donating["aliased_calls"], donating["alias_max_call_bytes"]) == (80000, 20, 4000)
    for key in ("h2d_transfers", "host_syncs", "compile_count"):
        assert plain[key] == donating[key], key
    assert plain["stdout"] == donating["stdout"]
    row = next(r for r in donating["attribution"]["lines"] if r["metrics"].get("aliased_calls"))
    aliased = row["metrics"]["aliased_calls"]
    assert (row["line"], aliased["total"], aliased["per_step"], aliased["bytes"]) == (14, 20, 1.0, 80000)
    assert not any(r["metrics"].get("aliased_calls") for r in plain["attribution"]["lines"])
    with capsys.disabled():
        print(f"\n[donation] without donate_argnums: {plain['alias_bytes']} B aliased; with: "
              f"{donating['alias_bytes']} B over {donating['aliased_calls']} calls (line {row['line']}, "
              f"{aliased['per_step']}/step)")


@pytest.mark.slow
def test_compiled_and_pmapped_calls_count_and_unusable_donations_do_not(tmp_path: Path):
    from jaxmem.evaluators.verify.api import verify_script

    script = tmp_path / "ways.py"
    script.write_text(textwrap.dedent("""\
        import jax, jax.numpy as jnp
        c = jax.jit(lambda s, x: s + x, donate_argnums=0).lower(jnp.zeros(10), jnp.ones(10)).compile()
        a = jnp.zeros(10)
        for _ in range(5):
            a = c(a, jnp.ones(10))
        p = jax.pmap(lambda s: s + 1, donate_argnums=0)
        b = jnp.zeros((1, 256))
        for _ in range(3):
            b = p(b)
        f = jax.jit(lambda s, y: (s + 1, y.sum()), donate_argnums=(0, 1))
        s, y = jnp.zeros(4), jnp.ones(50)
        for _ in range(2):
            s, t = f(s, y)
        print(float(a[0]), float(b[0, 0]), float(t))
        """))
    r = verify_script(str(script))
    assert r["ok"] and not r["tampered"]
    by_line = {row["line"]: row["metrics"]["aliased_calls"] for row in r["attribution"]["lines"]
               if row["metrics"].get("aliased_calls")}
    # AOT-compiled: 5 x 40 B; pmap: 3 x 1 KiB; y has no output of its shape, so only s's 16 B alias.
    assert {line: (a["total"], a["bytes"]) for line, a in by_line.items()} == {5: (5, 200), 9: (3, 3072), 13: (2, 32)}
    assert r["alias_bytes"] == 200 + 3072 + 32 and r["aliased_calls"] == 10
