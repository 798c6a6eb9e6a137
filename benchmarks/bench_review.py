"""time_review_tree: review a generated tree of realistic JAX project files, report files/s.

    python benchmarks/bench_review.py [--files 2000] [--repeats 3] [--jobs 1 2] [--tree DIR ...]

Files are built from blocks that real JAX projects contain (config dataclasses, model and loss
functions, optimisers, data pipelines, training and evaluation loops, CLI entry points), with
seeded random names and sizes so that no two files are identical; about one in five carries a
memory or transfer anti-pattern. The tree is written once; each configuration is timed
`--repeats` times in a fresh process (no warm caches across configurations) and the median is
reported. The requirement is >= 300 files/s on 2 cores.

`--tree DIR` times a tree of real files as well (each given folder, reviewed as the CLI reviews a
repository: .py and .ipynb, test files skipped); `make bench` passes the vendored real code of
the review benchmark (benchmarks/review/realcode: 24 public JAX repositories).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_FILES_PER_S = 300

HEADER = '''"""{doc}"""
from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

logger = logging.getLogger(__name__)
'''

CONFIG = '''

@dataclasses.dataclass(frozen=True)
class {Name}Config:
    """Hyper-parameters for {name}."""

    learning_rate: float = {lr}
    batch_size: int = {batch}
    hidden: int = {hidden}
    layers: int = {layers}
    steps: int = {steps}
    seed: int = {seed}
    log_every: int = 100

    def scaled(self, factor: float) -> "{Name}Config":
        return dataclasses.replace(self, learning_rate=self.learning_rate * factor)
'''

MODEL = '''

def init_{name}(key: jax.Array, cfg: {Name}Config, in_dim: int) -> list[dict[str, jax.Array]]:
    params = []
    dims = [in_dim] + [cfg.hidden] * cfg.layers
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        key, sub = jax.random.split(key)
        params.append({{"w": jax.random.normal(sub, (a, b)) * jnp.sqrt(2.0 / a), "b": jnp.zeros((b,))}})
    return params


def apply_{name}(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for layer in params[:-1]:
        x = jax.nn.gelu(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]


def loss_{name}(params, batch: dict[str, jax.Array]) -> jax.Array:
    logits = apply_{name}(params, batch["x"])
    labels = jax.nn.one_hot(batch["y"], logits.shape[-1])
    return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), axis=-1))
'''

OPTIMIZER = '''

def adam_init_{name}(params):
    zeros = jax.tree.map(jnp.zeros_like, params)
    return {{"m": zeros, "v": zeros, "t": jnp.zeros((), jnp.int32)}}


def adam_update_{name}(params, grads, state, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    t = state["t"] + 1
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    mhat = jax.tree.map(lambda m: m / (1 - b1 ** t), m)
    vhat = jax.tree.map(lambda v: v / (1 - b2 ** t), v)
    new = jax.tree.map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps), params, mhat, vhat)
    return new, {{"m": m, "v": v, "t": t}}
'''

STEP = '''

@functools.partial(jax.jit, donate_argnums=(0, 1), static_argnames=("lr",))
def train_step_{name}(params, opt_state, batch, lr: float):
    loss, grads = jax.value_and_grad(loss_{name})(params, batch)
    params, opt_state = adam_update_{name}(params, grads, opt_state, lr)
    return params, opt_state, loss


@jax.jit
def eval_step_{name}(params, batch):
    logits = apply_{name}(params, batch["x"])
    return jnp.mean(jnp.argmax(logits, -1) == batch["y"])
'''

DATA = '''

def synthetic_batches_{name}(cfg: {Name}Config, in_dim: int, classes: int) -> Iterator[dict[str, np.ndarray]]:
    rng = np.random.default_rng(cfg.seed)
    while True:
        x = rng.normal(size=(cfg.batch_size, in_dim)).astype(np.float32)
        y = rng.integers(0, classes, size=(cfg.batch_size,))
        yield {{"x": x, "y": y}}


def prefetch_{name}(batches, size: int = 2):
    queue = []
    for batch in batches:
        queue.append(jax.device_put(batch))
        if len(queue) > size:
            yield queue.pop(0)
    yield from queue
'''

TRAIN = '''

def train_{name}(cfg: {Name}Config, in_dim: int = {in_dim}, classes: int = {classes}):
    key = jax.random.key(cfg.seed)
    params = init_{name}(key, cfg, in_dim)
    opt_state = adam_init_{name}(params)
    losses = []
    start = time.perf_counter()
    data = prefetch_{name}(synthetic_batches_{name}(cfg, in_dim, classes))
    for step in range(cfg.steps):
        batch = next(data)
        params, opt_state, loss = train_step_{name}(params, opt_state, batch, lr=cfg.learning_rate)
        losses.append(loss)
        if step % cfg.log_every == 0:
            logger.info("step %d loss %.4f", step, float(loss))
    jax.block_until_ready(params)
    elapsed = time.perf_counter() - start
    history = jax.device_get(losses)
    return params, history, elapsed
'''

EVAL = '''

def evaluate_{name}(params, batches, limit: int = {limit}) -> float:
    accs = []
    for i, batch in enumerate(batches):
        if i >= limit:
            break
        accs.append(eval_step_{name}(params, jax.device_put(batch)))
    return float(jnp.mean(jnp.stack(accs)))
'''

SCAN = '''

def rnn_{name}(params, xs: jax.Array, h0: jax.Array) -> jax.Array:
    def cell(h, x):
        h = jnp.tanh(h @ params["wh"] + x @ params["wx"])
        return h, h

    _, hs = lax.scan(jax.checkpoint(cell, prevent_cse=False), h0, xs)
    return hs
'''

UTILS = '''

def count_params_{name}(params) -> int:
    return sum(int(np.prod(p.shape)) for p in jax.tree.leaves(params))


def describe_{name}(params) -> str:
    lines = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        lines.append(f"{{jax.tree_util.keystr(path)}}: {{leaf.shape}} {{leaf.dtype}}")
    return "\\n".join(lines)


def save_{name}(params, path: str) -> None:
    flat = {{jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_flatten_with_path(params)[0]}}
    np.savez(path, **flat)
'''

MAIN = '''

def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="{doc}")
    parser.add_argument("--steps", type=int, default={steps})
    parser.add_argument("--lr", type=float, default={lr})
    args = parser.parse_args(argv)
    cfg = {Name}Config(steps=args.steps, learning_rate=args.lr)
    params, history, elapsed = train_{name}(cfg)
    print(f"trained {{count_params_{name}(params)}} parameters in {{elapsed:.1f}}s; final loss {{history[-1]:.4f}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''

# Anti-patterns a fraction of files carry, so rules do real work during the benchmark.
SMELLS = [
    '''

def slow_loop_{name}(params, batches):
    total = 0.0
    for batch in batches:
        loss = loss_{name}(params, batch)
        total += float(loss)
        print(f"loss {{loss}}")
    return total
''',
    '''

def fill_{name}(n: int):
    x = jnp.zeros(n)
    for i in range(n):
        x = x.at[i].set(i)
    return x
''',
    '''

def sweep_{name}(x, scales):
    out = []
    for s in scales:
        f = jax.jit(lambda v: v * s)
        out.append(f(x))
    return out
''',
    '''

@jax.jit
def unrolled_{name}(h, w):
    for _ in range(256):
        h = jnp.tanh(h @ w)
    return h
''',
]

BLOCKS = [CONFIG, MODEL, OPTIMIZER, STEP, DATA, TRAIN, EVAL, SCAN, UTILS]


def make_file(rng: random.Random, index: int) -> str:
    name = f"{rng.choice(['mlp', 'net', 'clf', 'enc', 'tower', 'head', 'block'])}{index}"
    fields = {
        "name": name, "Name": name.capitalize(), "doc": f"Experiment {index}: {name} on synthetic data.",
        "lr": rng.choice([1e-3, 3e-4, 1e-2]), "batch": rng.choice([32, 64, 128]), "hidden": rng.choice([128, 256, 512]),
        "layers": rng.randint(2, 6), "steps": rng.choice([100, 1000, 5000]), "seed": rng.randint(0, 99),
        "in_dim": rng.choice([32, 784, 1024]), "classes": rng.choice([2, 10, 100]), "limit": rng.choice([10, 50]),
    }
    parts = [HEADER.format(**fields)]
    for block in BLOCKS:
        parts.append(block.format(**fields))
        if rng.random() < 0.3:  # real files repeat helpers with small variations
            parts.append(UTILS.replace("_{name}", f"_{{name}}_v{rng.randint(2, 9)}").format(**fields))
    if rng.random() < 0.2:
        parts.append(rng.choice(SMELLS).format(**fields))
    parts.append(MAIN.format(**fields))
    return "".join(parts)


def generate(root: Path, n: int, seed: int = 0) -> tuple[int, int]:
    rng = random.Random(seed)
    lines = size = 0
    for i in range(n):
        pkg = root / f"pkg{i % 20:02d}" / f"sub{i % 7}"
        pkg.mkdir(parents=True, exist_ok=True)
        text = make_file(rng, i)
        (pkg / f"exp_{i:04d}.py").write_text(text, encoding="utf-8")
        lines += text.count("\n")
        size += len(text.encode())
    return lines, size


def _time_once(root: Path, jobs: int) -> dict:
    """One timed review in a fresh interpreter: the number a user sees from the CLI.

    CPU seconds (the child and its workers) are reported next to wall time because a shared
    machine's other load stretches wall time but not the work done.
    """
    code = (
        "import json, resource, sys, time\n"
        "t0 = time.perf_counter()\n"
        "from jaxmem.evaluators.review.api import review_paths\n"
        f"r = review_paths([{str(root)!r}], jobs={jobs}, progress=False)\n"
        "wall = time.perf_counter() - t0\n"
        "cpu = sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)"
        " for f in ('ru_utime', 'ru_stime'))\n"
        "print(json.dumps({'seconds': wall, 'cpu': cpu, 'files': r.files, 'findings': len(r.findings)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                         cwd=Path(__file__).resolve().parents[1], check=True, env=_child_env())
    return json.loads(out.stdout.strip().splitlines()[-1])


_PYCACHE: str | None = None


def _child_env() -> dict[str, str]:
    """The timed interpreters' environment. By default they run with compiled bytecode, as a
    user's installed jaxmem does (pip compiles on install): a PYTHONDONTWRITEBYTECODE=1 shell
    (this project's sandbox sets it) would otherwise recompile every module of jaxmem and its
    dependencies in every run, a tenth to a fifth of a second not spent by any installed CLI. The
    bytecode goes to a temporary folder (PYTHONPYCACHEPREFIX), never into the tree, and is
    written by one untimed run before the timed ones. `--no-bytecode` times the other way."""
    env = dict(os.environ)
    if _PYCACHE is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = _PYCACHE
    return env


def _parse_only(root: Path) -> dict:
    """The floor for any AST-based reviewer: reading and parsing the same files, nothing else
    (a notebook's code cells joined, as the reviewer reads them)."""
    code = (
        "import ast, json, resource, sys, time\n"
        "from pathlib import Path\n"
        "from jaxmem.evaluators.review import inputs, notebook\n"
        "t0 = time.perf_counter()\n"
        f"files, _ = inputs.discover([{str(root)!r}], [], True, False)\n"
        "for f in files:\n"
        "    text = Path(f).read_text(errors='replace')\n"
        "    try:\n"
        "        ast.parse(notebook.load(text).source if f.endswith('.ipynb') else text)\n"
        "    except Exception:\n"
        "        pass\n"
        "wall = time.perf_counter() - t0\n"
        "cpu = sum(getattr(resource.getrusage(resource.RUSAGE_SELF), f) for f in ('ru_utime', 'ru_stime'))\n"
        "print(json.dumps({'seconds': wall, 'cpu': cpu, 'files': len(files), 'findings': 0}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, check=True,
                         env=_child_env())
    return json.loads(out.stdout.strip().splitlines()[-1])


def _tree_size(root: Path) -> tuple[int, int, int]:
    """Files the reviewer reads under `root` (as the CLI discovers them), their lines and bytes.
    In this process: nothing here is timed, and each timed run starts a fresh one."""
    from jaxmem.evaluators.review import inputs

    files, _ = inputs.discover([str(root)], [], True, False)
    texts = [Path(f).read_bytes() for f in files]
    return len(files), sum(t.count(b"\n") for t in texts), sum(map(len, texts))


def time_tree(root: Path, what: str, args) -> float:
    """Print one table for the tree at `root`; return the best wall-clock files/s."""
    files, lines, size = _tree_size(root)
    load = os.getloadavg()[0]
    if _PYCACHE is not None:
        _time_once(root, max(args.jobs))  # untimed: writes the bytecode the timed runs load
    print(f"\n{what}: {files} files, {lines:,} lines, {size / 1e6:.1f} MB; {os.cpu_count()} CPUs, "
          f"load average {load:.1f}; median of {args.repeats} (each run in a fresh process, imports included, "
          f"{'bytecode compiled as after an install' if _PYCACHE else 'no bytecode cache: every import compiles'})")
    print("cpu files/s = files per CPU-second x jobs: the rate with that many otherwise idle cores")
    print(f"{'jobs':>4} | {'wall s':>7} | {'files/s':>8} | {'lines/s':>9} | {'cpu s':>6} | {'cpu files/s':>11} | "
          f"{'findings':>8} | target {TARGET_FILES_PER_S} files/s")
    print("-" * 92)
    best = best_cpu = 0.0
    for jobs in args.jobs:
        runs = [_time_once(root, jobs) for _ in range(args.repeats)]
        assert all(r["files"] == files for r in runs), (files, runs)
        sec = statistics.median(r["seconds"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        rate = files / sec
        cpu_rate = files / cpu * jobs
        best = max(best, rate)
        best_cpu = max(best_cpu, cpu_rate)
        ok = "ok" if rate >= TARGET_FILES_PER_S else "BELOW (wall)"
        print(f"{jobs:>4} | {sec:>7.2f} | {rate:>8.0f} | {lines / sec:>9,.0f} | {cpu:>6.1f} | {cpu_rate:>11.0f} | "
              f"{runs[0]['findings']:>8} | {ok}")
    runs = [_parse_only(root) for _ in range(args.repeats)]
    sec = statistics.median(r["seconds"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    print(f"{'parse only':>10} (ast.parse of the same files, 1 process, for scale): {files / sec:.0f} files/s wall, "
          f"{files / cpu:.0f} files per CPU-second")
    # Wall time is the requirement; on a shared machine the CPU-time figure says what the
    # same work does on otherwise idle cores. Both are printed; only wall time passes.
    print(f"verdict: best wall {best:.0f} files/s (load average {os.getloadavg()[0]:.1f} now); "
          f"CPU-derived {best_cpu:.0f} files/s; target {TARGET_FILES_PER_S}: "
          f"{'met' if best >= TARGET_FILES_PER_S else 'not met in wall time'}")
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000, help="generated files (0: none)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tree", nargs="*", default=[], help="folders of real code to time as well")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="time without a bytecode cache (every run compiles every module it imports)")
    args = parser.parse_args(argv)
    global _PYCACHE
    pycache = None if args.no_bytecode else tempfile.TemporaryDirectory(prefix="jaxmem-bench-pycache-")
    _PYCACHE = pycache.name if pycache is not None else None
    met = True
    if args.files:
        with tempfile.TemporaryDirectory(prefix="jaxmem-bench-review-") as tmp:
            generate(Path(tmp), args.files)
            met &= time_tree(Path(tmp), "generated tree", args) >= TARGET_FILES_PER_S
    for tree in args.tree:
        if not Path(tree).is_dir():
            parser.error(f"--tree {tree!r}: not a folder")
        met &= time_tree(Path(tree).resolve(), tree, args) >= TARGET_FILES_PER_S
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
