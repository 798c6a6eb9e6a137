"""Each metric on a known case, measured in real child processes (the issue's list)."""
from __future__ import annotations

import pytest

from jaxmem.evaluators.verify.metrics import RSS_NOISE_FLOOR
from jaxmem.evaluators.verify.runner import run_snippet

pytestmark = pytest.mark.slow


def both(case, baseline, before: str, after: str, **kw):
    b = run_snippet(case(before), baseline=baseline, **kw)
    a = run_snippet(case(after), baseline=baseline, **kw)
    assert b.ok, (b.error, b.traceback)
    assert a.ok, (a.error, a.traceback)
    return b, a


def test_numpy_args_in_a_loop_transfer_once_per_call(case, baseline):
    b, a = both(case, baseline, "numpy_args_loop", "device_put_once")
    # 10 calls with a NumPy argument; the device_put version moves x once, explicitly.
    assert b.values["implicit_h2d_transfers"] == 10
    assert a.values["implicit_h2d_transfers"] == 0
    assert b.values["h2d_transfers"] == 11 and a.values["h2d_transfers"] == 2


def test_float_per_step_is_a_sync_point_on_its_line(case, baseline):
    b, a = both(case, baseline, "float_per_step", "accumulate_on_device")
    assert b.values["host_syncs"] == 7 and a.values["host_syncs"] == 1
    lines = {(s["line"], s["source"]) for s in b.syncs}
    assert lines == {(9, "total += float(loss)")}
    assert [(s["line"], s["how"]) for s in a.syncs] == [(10, "__float__")]


def test_donation_aliases_the_buffer_and_cuts_peak_rss(case, baseline):
    entry = {"function": "update", "args": "example_args"}
    b, a = both(case, baseline, "update_plain", "update_donated", entry=entry)
    assert b.values["alias_bytes"] == 0
    assert a.values["alias_bytes"] == 1024 * 4           # the donated f32[1024] argument
    saved = b.values["peak_rss"] - a.values["peak_rss"]
    # One 192 MiB copy fewer; allow the measurement notes' noise margin.
    assert saved > 192 * (1 << 20) - RSS_NOISE_FLOOR, saved


def test_remat_inside_scan_cuts_temp_bytes(case, baseline):
    entry = {"function": "grad", "args": "example_args"}
    b, a = both(case, baseline, "scan_plain", "scan_remat", entry=entry)
    assert a.values["temp_bytes"] < b.values["temp_bytes"] / 2, (b.values, a.values)
    assert a.values["argument_bytes"] == b.values["argument_bytes"]


def test_jit_inside_a_loop_compiles_every_time(case, baseline):
    b, a = both(case, baseline, "jit_in_loop", "jit_once")
    assert b.values["compile_count"] - a.values["compile_count"] >= 4
    assert b.values["compile_count"] >= 5


def test_exact_metrics_repeat_exactly(case, baseline):
    runs = [run_snippet(case("numpy_args_loop"), baseline=baseline) for _ in range(2)]
    keys = ("h2d_transfers", "implicit_h2d_transfers", "host_syncs", "compile_count", "live_bytes")
    assert [runs[0].values[k] for k in keys] == [runs[1].values[k] for k in keys]
