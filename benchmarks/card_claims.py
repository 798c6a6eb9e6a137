"""Re-measure the card claims that no snippet pair covers; prints one table.

    .venv/bin/python benchmarks/card_claims.py

The cards quote these figures (jit-compilation: the compiled-program cache; sharding-memory: a
dimension the mesh axis does not divide; gpu-allocator: the XLA_PYTHON_CLIENT_* variables on CPU).
They are not verifier pairs because they are not before/after fixes with one metric each. Every
measurement runs in its own child process: the device count and the allocator variables are read
once, when JAX starts its backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

# The children read their own resident size rather than import the verifier's reader
# (evaluators/verify/sandbox.py): importing the project would add to the absolute size quoted.
RSS = textwrap.dedent("""
    def rss_mib():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
""")

JIT_CACHE = RSS + textwrap.dedent("""
    import gc, json
    import jax, jax.numpy as jnp
    traces = []
    def f(x):
        traces.append(1)
        return jnp.mean(x @ x.T)
    jf = jax.jit(f)
    for n in range(1, 4):
        jf(jnp.ones((n, 8))).block_until_ready()
    r0 = rss_mib()
    N = 300
    for n in range(4, 4 + N):
        jf(jnp.ones((n, 8))).block_until_ready()
    r1 = rss_mib()
    out = {"shapes": N, "cache_entries": jf._cache_size(), "rss_growth_mib": round(r1 - r0, 1)}
    t = len(traces); del jf; gc.collect()
    jf = jax.jit(f); jf(jnp.ones((10, 8))).block_until_ready()
    out["retraces_after_rejit_same_function"] = len(traces) - t
    t = len(traces); jf.clear_cache(); jf(jnp.ones((10, 8))).block_until_ready()
    out["retraces_after_clear_cache"] = len(traces) - t
    before = rss_mib(); jax.clear_caches(); gc.collect(); after = rss_mib()
    out["rss_before_after_clear_caches_mib"] = [round(before, 1), round(after, 1)]
    g = jax.jit(lambda x: jnp.mean(x @ x.T))
    for n in range(4, 4 + N):
        g(jnp.ones((n, 8))).block_until_ready()
    out["rss_after_300_new_compiles_mib"] = round(rss_mib(), 1)
    print(json.dumps(out))
""")

UNEVEN = textwrap.dedent("""
    import os, json
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=5"
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
    out = {}
    def attempt(name, fn):
        try:
            out[name] = fn()
        except Exception as e:
            out[name] = type(e).__name__ + ": " + str(e).split(".")[0][:90]
    mesh = jax.make_mesh((5,), ("data",))
    s = NamedSharding(mesh, P("data", None))
    x = np.ones((1024, 16), np.float32)
    attempt("device_put 1024 rows over 5", lambda: str(jax.device_put(x, s).sharding.spec))
    attempt("jit out_shardings", lambda: str(jax.jit(lambda a: a * 2, out_shardings=s)(x).sharding.spec))
    auto = NamedSharding(jax.make_mesh((5,), ("data",), axis_types=(AxisType.Auto,)), P("data", None))
    def wsc():
        y = jax.jit(lambda a: jax.lax.with_sharding_constraint(a * 2, auto))(x)
        return f"spec {y.sharding.spec}, shard shapes {sorted({sh.data.shape for sh in y.addressable_shards})}"
    attempt("with_sharding_constraint (Auto axes)", wsc)
    xp = np.pad(x, ((0, (-1024) % 5), (0, 0)))
    attempt("padded to 1025 rows", lambda: str(sorted({sh.data.shape for sh in jax.device_put(xp, s).addressable_shards})))
    print(json.dumps(out))
""")

CPU_ALLOCATOR = RSS + textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp
    x = jnp.ones((256, 2**20), jnp.float32); x.block_until_ready()
    print(json.dumps({"backend": jax.default_backend(), "allocated_mib": x.nbytes / 2**20,
                      "rss_mib": round(rss_mib(), 1)}))
""")


def child(code: str, extra_env: dict[str, str] | None = None) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", **(extra_env or {})}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    import jax

    print(f"jax {jax.__version__}, CPU backend; each block ran in its own process\n")
    rows = [("jit-compilation: compiled-program cache", child(JIT_CACHE)),
            ("sharding-memory: 1,024 rows over a 5-device axis", child(UNEVEN)),
            ("gpu-allocator: XLA_PYTHON_CLIENT_* on CPU (MEM_FRACTION=.01, PREALLOCATE=true, ALLOCATOR=platform)",
             child(CPU_ALLOCATOR, {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".01", "XLA_PYTHON_CLIENT_PREALLOCATE": "true",
                                   "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}))]
    for title, values in rows:
        print(f"| {title} | |\n|---|---|")
        for key, value in values.items():
            print(f"| {key} | {value} |")
        print()


if __name__ == "__main__":
    main()
