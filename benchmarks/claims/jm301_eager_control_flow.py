"""JM301's eager control flow, checked: outside jit, `lax.scan`, `lax.fori_loop`,
`lax.while_loop`, `lax.cond`, `lax.switch` and `lax.map` trace their function and compile the
result on every call whose function is a new object (a lambda, a `functools.partial`, a def
made in the loop); the same function object is traced and compiled once. JAX's iterative
solvers (`jax.scipy.sparse.linalg.cg`, `gmres`, `bicgstab`) and `jax.scipy.optimize.minimize`
make their loop bodies anew inside every call, so called eagerly they compile on every call
even with the same operator or objective; jitted once around them, they do not.

    python benchmarks/claims/jm301_eager_control_flow.py

Runs in a fresh interpreter, counting XLA compilations with a `jax.monitoring` listener on the
backend-compile event, after one warm-up call. Output on jax 0.10.2, CPU:

    lax.scan, a new lambda each call: 5 compiles in 5 calls
    lax.scan, the same function: 0 compiles in 5 calls
    lax.scan, a new functools.partial of the same function: 5 compiles in 5 calls
    lax.fori_loop, a new lambda each call: 5 compiles in 5 calls
    lax.fori_loop, the same function: 0 compiles in 5 calls
    lax.while_loop, new lambdas each call: 5 compiles in 5 calls
    lax.cond, new lambdas each call: 5 compiles in 5 calls
    lax.cond, the same functions: 0 compiles in 5 calls
    lax.switch, new lambdas each call: 5 compiles in 5 calls
    lax.map, a new lambda each call: 5 compiles in 5 calls
    cg, the same operator function: 5 compiles in 5 calls
    gmres, the same operator function: 5 compiles in 5 calls
    bicgstab, the same operator function: 5 compiles in 5 calls
    minimize (BFGS), the same objective: 5 compiles in 5 calls
    cg inside a function jitted once: 0 compiles in 5 calls
"""
from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import functools
import jax, jax.numpy as jnp
import jax.monitoring as monitoring
from jax import lax
from jax.scipy.optimize import minimize
from jax.scipy.sparse.linalg import bicgstab, cg, gmres

n = {"c": 0}

def listen(event, *args, **kwargs):
    n["c"] += "backend_compile" in event

monitoring.register_event_duration_secs_listener(listen)
x = jnp.ones(8)
A = jnp.eye(8) * 2.0

def run(label, call):
    call()  # warm-up: what a first call compiles is not the question
    n["c"] = 0
    for _ in range(5):
        jax.block_until_ready(call())
    print(f"{label}: {n['c']} compiles in 5 calls")

def body(c, _):
    return c * 2.0, None

def fori_body(i, c):
    return c * 2.0

def double(v):
    return v * 2.0

def same(v):
    return v

def matvec(v):
    return A @ v

def objective(v):
    return jnp.sum((v - 1.0) ** 2)

run("lax.scan, a new lambda each call", lambda: lax.scan(lambda c, _: (c * 2.0, None), x, None, length=3))
run("lax.scan, the same function", lambda: lax.scan(body, x, None, length=3))
run("lax.scan, a new functools.partial of the same function",
    lambda: lax.scan(functools.partial(body), x, None, length=3))
run("lax.fori_loop, a new lambda each call", lambda: lax.fori_loop(0, 3, lambda i, c: c * 2.0, x))
run("lax.fori_loop, the same function", lambda: lax.fori_loop(0, 3, fori_body, x))
run("lax.while_loop, new lambdas each call", lambda: lax.while_loop(lambda c: c[0] < 10, lambda c: c * 2.0, x))
run("lax.cond, new lambdas each call", lambda: lax.cond(x[0] > 0, lambda v: v * 2, lambda v: v, x))
run("lax.cond, the same functions", lambda: lax.cond(x[0] > 0, double, same, x))
run("lax.switch, new lambdas each call", lambda: lax.switch(1, [lambda v: v, lambda v: v * 2], x))
run("lax.map, a new lambda each call", lambda: lax.map(lambda v: v * 2, x))
run("cg, the same operator function", lambda: cg(matvec, x, maxiter=5)[0])
run("gmres, the same operator function", lambda: gmres(matvec, x, maxiter=5)[0])
run("bicgstab, the same operator function", lambda: bicgstab(matvec, x, maxiter=5)[0])
run("minimize (BFGS), the same objective", lambda: minimize(objective, x, method="BFGS").x)
solve = jax.jit(lambda b: cg(matvec, b, maxiter=5)[0])
run("cg inside a function jitted once", lambda: solve(x))
"""


def main() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    print(out.stdout.strip() or out.stderr.strip()[-400:])


if __name__ == "__main__":
    main()
