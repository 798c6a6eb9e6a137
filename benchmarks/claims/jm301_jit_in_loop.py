"""JM301's figures, measured: which callables re-wrapped by `jax.jit` in a loop recompile, and
what re-wrapping a stable function costs per call.

    python benchmarks/claims/jm301_jit_in_loop.py

Output on jax 0.10.2, CPU (this project's machine, 2 shared cores):

    same module function: 1 compiles in 5 iterations
    staticmethod: 1 compiles in 5 iterations
    module attribute jnp.tanh: 1 compiles in 5 iterations
    bound method, same object: 5 compiles in 5 iterations
    new partial, same args: 5 compiles in 5 iterations
    def inside the loop: 5 compiles in 5 iterations
    lambda: 5 compiles in 5 iterations
    jitted once, called: 3.6 us per call
    jax.jit(f)(x) re-wrapped each call: 34.0 us per call

(A second run: 3.7 and 35.4 us.) The rule's message rounds the difference to ~30 us per call.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
from jax import monitoring

_compiles = {"n": 0}


def _listener(name: str, _secs: float, **_kw) -> None:
    if name.endswith("backend_compile_duration"):
        _compiles["n"] += 1


def f(x, s=1.0):
    return x * s


class A:
    def m(self, x):
        return x + 1

    @staticmethod
    def sm(x):
        return x + 2


def compiles(label: str, make, x, n: int = 5) -> None:
    _compiles["n"] = 0
    for i in range(n):
        make(i)(x).block_until_ready()
    print(f"{label}: {_compiles['n']} compiles in {n} iterations")


def per_call_us(call, reps: int = 2000) -> float:
    for _ in range(200):
        call()
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        jax.block_until_ready(call())
        best.append((time.perf_counter() - t0) / reps * 1e6)
    return sorted(best)[2]


def main() -> None:
    monitoring.register_event_duration_secs_listener(_listener)
    x = jnp.ones(8)
    a = A()

    def def_in_loop(i):
        def g(v):
            return v * 3
        return jax.jit(g)

    compiles("same module function", lambda i: jax.jit(f), x)
    compiles("staticmethod", lambda i: jax.jit(A.sm), x)
    compiles("module attribute jnp.tanh", lambda i: jax.jit(jnp.tanh), x)
    compiles("bound method, same object", lambda i: jax.jit(a.m), x)
    compiles("new partial, same args", lambda i: jax.jit(functools.partial(f, s=2.0)), x)
    compiles("def inside the loop", def_in_loop, x)
    compiles("lambda", lambda i: jax.jit(lambda v: v * 3), x)
    jf = jax.jit(f)
    print(f"jitted once, called: {per_call_us(lambda: jf(x)):.1f} us per call")
    print(f"jax.jit(f)(x) re-wrapped each call: {per_call_us(lambda: jax.jit(f)(x)):.1f} us per call")


if __name__ == "__main__":
    main()
