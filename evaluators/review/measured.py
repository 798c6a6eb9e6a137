"""Measured findings: what a run of the user's code showed on every step that no static rule flagged.

These four codes are produced only by `jaxmem review --run FILE` / `--run-cmd CMD` (and the web
app's run), never by the static pass: the engine finds no hook to call on them. Each finding carries
the measured counts in `Finding.runtime` (status "measured"), so its confidence is "sure". They are
registered beside the static rules (registry.measured_rules) so that --list-rules, --explain,
--select/--ignore and SARIF's rule table know them.
"""
from __future__ import annotations

import inspect
from typing import ClassVar

from jaxmem.evaluators.review.rule import Rule


class MeasuredRule(Rule):
    """A code for costs a run measured; its documentation is the class docstring."""

    metric: ClassVar[str]   # the verifier's name of what was counted (attribution.METRIC_NAMES)
    what: ClassVar[str]     # the count in words, singular

    @property
    def doc(self) -> str:
        return inspect.cleandoc(type(self).__doc__ or "")


class MeasuredHostSyncPerStep(MeasuredRule):
    """JM011 measured-host-sync-per-step

    What it does
        Reported after running the code (`--run`, `--run-cmd`): a line of your code read a device
        value on the host (`float`, `.item()`, `.tolist()`, `np.asarray`, `print`, `device_get`) on
        at least half of the steps of a loop, or 10 or more times from one line of a library in
        every run of it (the library's own loop), and no static rule had flagged it. The line is the innermost line of your code; the finding
        names the call site when the read sits in a helper.

    Why is this bad
        Every read waits for all queued device work and copies the value to the host, so the host
        stops feeding the device once per step. A helper that logs metrics every step hides this
        from the reader of the training loop.

    Example
        def log(metrics):
            return {k: v.tolist() for k, v in metrics.items()}

        for batch in batches:
            state, metrics = train_step(state, batch)
            history.append(log(metrics))      # 2 syncs per step, measured at the helper's line

    Use instead
        for i, batch in enumerate(batches):
            state, metrics = train_step(state, batch)
            if i % 100 == 0:
                history.append(log(metrics))  # read every 100 steps, or accumulate on device
    """

    code = "JM011"
    name = "measured-host-sync-per-step"
    topic = "implicit-host-sync"
    severity = "warning"
    message = "measured: {count} host sync{s} per step ({how}) on {steps_with} of {steps} steady steps"
    fix = "Keep the values on device and read them every N steps (or once after the loop)."
    metric = "host_syncs"
    what = "host sync"


class MeasuredHostToDevicePerStep(MeasuredRule):
    """JM012 measured-host-to-device-per-step

    What it does
        Reported after running the code: a line of your code sent host data (NumPy arrays, Python
        scalars) to the device implicitly (not through `jax.device_put`) on at least half of the
        steps of a loop, counted from JAX's transfer guard, and no static rule had flagged it.
        Bytes are given where JAX's log shows the shape (its C++ fast path for arguments of a
        jitted call does not).

    Why is this bad
        Each transfer is a copy over the host-device link inside the step; small ones each pay a
        launch, large ones the bandwidth, and the device waits for them unless they are prefetched.

    Example
        for i in range(steps):
            batch = np.random.rand(256, 100)
            loss = step(params, batch)       # one host->device copy per step

    Use instead
        batches = jax.device_put(np.stack(all_batches))   # one transfer
        for i in range(steps):
            loss = step(params, batches[i])
    """

    code = "JM012"
    name = "measured-host-to-device-per-step"
    topic = "batch-transfers"
    severity = "warning"
    message = "measured: {count} host->device transfer{s} per step{bytes} on {steps_with} of {steps} steady steps"
    fix = "Move the data to the device once (jax.device_put of a stacked array) or prefetch the next batch."
    metric = "implicit_h2d_transfers"
    what = "host->device transfer"


class MeasuredDeviceToHostPerStep(MeasuredRule):
    """JM013 measured-device-to-host-per-step

    What it does
        Reported after running the code on a GPU or TPU: a line of your code copied device data to
        the host on at least half of the steps of a loop, counted from JAX's transfer guard, and no
        static rule had flagged it. On CPU the guard logs no device->host copies (device memory is
        host memory), so CPU runs report host syncs (JM011) instead.

    Why is this bad
        A device->host copy in the step blocks the host until the device has finished and moves
        the data over the link every step.

    Example
        for batch in batches:
            state, logits = step(state, batch)
            preds.append(jax.device_get(logits))   # a copy every step

    Use instead
        for batch in batches:
            state, logits = step(state, batch)
            preds.append(logits)                    # stays on device
        preds = jax.device_get(preds)               # one copy after the loop
    """

    code = "JM013"
    name = "measured-device-to-host-per-step"
    topic = "implicit-host-sync"
    severity = "warning"
    message = "measured: {count} device->host transfer{s} per step{bytes} on {steps_with} of {steps} steady steps"
    fix = "Keep results on device and copy them once after the loop, or every N steps."
    metric = "d2h_transfers"
    what = "device->host transfer"


class MeasuredRecompilePerStep(MeasuredRule):
    """JM014 measured-recompile-per-step

    What it does
        Reported after running the code: JAX compiled again on at least half of the steps after
        the first at this line (new shapes, new static arguments, a new function object, cleared
        caches, or eager operations under `jax.disable_jit`), and no static rule had flagged it.
        The first step's compilations are expected and not reported.

    Why is this bad
        A compilation takes from milliseconds to minutes and holds the step up; on every step it
        usually costs more than the computation itself.

    Example
        for n in range(1, 100):
            total = f(jnp.zeros(n))      # a new shape, a new compilation, every step

    Use instead
        x = jnp.zeros(128)               # pad to one shape (or a few buckets)
        for n in range(1, 100):
            total = f(x, n)              # n as a traced argument with a mask inside f
    """

    code = "JM014"
    name = "measured-recompile-per-step"
    topic = "jit-compilation"
    severity = "warning"
    message = "measured: {count} compilation{s} per step ({how}) on {steps_with} of {steps} steady steps"
    fix = "Keep shapes and static arguments the same from step to step, and create jitted functions once."
    metric = "compiles"
    what = "compilation"


RULES: tuple[MeasuredRule, ...] = tuple(cls() for cls in (MeasuredHostSyncPerStep, MeasuredHostToDevicePerStep,
                                                          MeasuredDeviceToHostPerStep, MeasuredRecompilePerStep))
BY_METRIC = {r.metric: r for r in RULES}
