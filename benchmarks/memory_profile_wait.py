"""Does waiting for queued work change what the device memory profiler lists? (JM702's premise)

    python benchmarks/memory_profile_wait.py

Dispatches a jitted computation that runs for seconds, takes `jax.profiler.device_memory_profile()`
right away (the output still pending; an input the queued work uses, no longer referenced from
Python) and again after `block_until_ready`, and prints the live bytes each profile lists, read
from the pprof protocol buffer (sample value 1: bytes). On the CPU backend only; what a GPU or TPU
profile does is not measurable here.
"""
from __future__ import annotations

import gzip
import time

import jax
import jax.numpy as jnp

MB = 2**20


def _varint(b: bytes, i: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return out, i


def _fields(b: bytes):
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            value, i = b[i:i + n], i + n
        elif wire == 1:
            value, i = b[i:i + 8], i + 8
        else:
            value, i = b[i:i + 4], i + 4
        yield field, wire, value


def live_bytes(profile: bytes) -> int:
    """Sum of the samples' second value (bytes) in a pprof Profile (field 2: Sample; its field 2: values)."""
    total = 0
    for field, _wire, sample in _fields(gzip.decompress(profile)):
        if field != 2:
            continue
        for f2, wire2, v in _fields(sample):
            if f2 == 2 and wire2 == 2:
                values, j = [], 0
                while j < len(v):
                    x, j = _varint(v, j)
                    values.append(x)
                total += values[1] if len(values) > 1 else 0
    return total


@jax.jit
def slow(x):
    return jax.lax.fori_loop(0, 200, lambda i, c: jnp.tanh(c @ c * 0.001), x)


def main() -> None:
    warm = jnp.ones((1024, 1024))
    slow(warm).block_until_ready()  # compile outside the measurement
    a = jnp.ones((1024, 1024)) * 3
    a.block_until_ready()
    t0 = time.perf_counter()
    y = slow(a)
    del a  # only the queued computation still uses it
    before = live_bytes(jax.profiler.device_memory_profile())
    taken = time.perf_counter() - t0
    y.block_until_ready()
    done = time.perf_counter() - t0
    after = live_bytes(jax.profiler.device_memory_profile())
    print(f"jax {jax.__version__}, backend {jax.default_backend()}; arrays of {4 * 1024 * 1024 / MB:.0f} MiB")
    print(f"{'profile':<28} | {'taken at s':>10} | {'live MiB':>8}")
    print("-" * 54)
    print(f"{'right after dispatch':<28} | {taken:>10.3f} | {before / MB:>8.1f}")
    print(f"{'after block_until_ready':<28} | {done:>10.3f} | {after / MB:>8.1f}")
    print("same buffers listed" if before == after else "the profiles differ")


if __name__ == "__main__":
    main()
