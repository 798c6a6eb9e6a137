"""JM507's claim, checked: a Python loop that only advances a carried state through a small jitted
step pays one dispatch per iteration; the same steps under `lax.scan` (or `fori_loop`) run as one
program, so a small step's loop is dominated by dispatch.

    python benchmarks/claims/jm508_python_loop_of_jitted_steps.py

A three-body leapfrog step (a few dozen flops) and a 256x256 matmul-tanh step, 2,000 steps each:
a Python loop of the jitted step (the trajectory appended to a list, then stacked) against one
jitted `lax.scan` over the same step; median of 5 runs, compiled first. Output on jax 0.10.2,
CPU (2 cores, other work running on the machine):

    three-body leapfrog  Python loop     37.5 ms (  18.8 us/step)   lax.scan      0.3 ms (   0.1 us/step)   149.8x
    256x256 matmul-tanh  Python loop   1740.1 ms ( 870.1 us/step)   lax.scan    783.3 ms ( 391.6 us/step)     2.2x
"""
from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp

STEPS = 2000


def leapfrog(state):
    pos, vel = state
    d = pos[:, None, :] - pos[None, :, :]
    r3 = (jnp.sum(d * d, -1) + 1e-3) ** 1.5
    acc = -jnp.sum(d / r3[..., None], axis=1)
    vel = vel + 1e-3 * acc
    return pos + 1e-3 * vel, vel


def matmul(state):
    x, w = state
    return jnp.tanh(x @ w), w


def python_loop(step, state):
    jstep = jax.jit(step)
    jstep(state)[0].block_until_ready()  # compiled before timing
    t = time.perf_counter()
    trajectory = []
    for _ in range(STEPS):
        state = jstep(state)
        trajectory.append(state[0])
    jnp.stack(trajectory).block_until_ready()
    return time.perf_counter() - t


def scanned(step, state):
    run = jax.jit(lambda s: jax.lax.scan(lambda c, _: (step(c), step(c)[0]), s, None, length=STEPS))
    run(state)[1].block_until_ready()
    t = time.perf_counter()
    run(state)[1].block_until_ready()
    return time.perf_counter() - t


def main() -> None:
    states = {"three-body leapfrog": (jnp.ones((3, 2)) * jnp.arange(3.0)[:, None], jnp.zeros((3, 2))),
              "256x256 matmul-tanh": (jnp.ones((256, 256)) * 0.01, jnp.eye(256))}
    steps = {"three-body leapfrog": leapfrog, "256x256 matmul-tanh": matmul}
    for name, state in states.items():
        loop = statistics.median(python_loop(steps[name], state) for _ in range(5))
        scan = statistics.median(scanned(steps[name], state) for _ in range(5))
        print(f"{name:20s} Python loop {loop * 1e3:8.1f} ms ({loop / STEPS * 1e6:6.1f} us/step)   "
              f"lax.scan {scan * 1e3:8.1f} ms ({scan / STEPS * 1e6:6.1f} us/step)   {loop / scan:5.1f}x")
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {STEPS} steps")


if __name__ == "__main__":
    main()
