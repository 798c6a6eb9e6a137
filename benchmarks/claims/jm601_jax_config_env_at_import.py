"""JM601's `JAX_*` claim, checked: JAX reads its configuration variables when it is imported.
Set before `import jax` each takes effect; set after it (even before any backend starts) none
does, and `jax.config.update(...)` is the way to change them then.

    python benchmarks/claims/jm601_jax_config_env_at_import.py

Each case runs in a fresh interpreter. Output on jax 0.10.2, CPU:

    JAX_ENABLE_X64=1 before import: float64; after import: float32
    JAX_PLATFORMS=bogus before import: fails (unknown backend); after import: cpu
    JAX_DISABLE_JIT=1 before import: True; after import: False
    JAX_COMPILATION_CACHE_DIR before import: 3 cache entries; after import: no cache directory
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CASES = {
    "JAX_ENABLE_X64=1": ("JAX_ENABLE_X64", "1", "import jax.numpy as jnp; print(jnp.ones(2).dtype)"),
    "JAX_PLATFORMS=bogus": ("JAX_PLATFORMS", "bogus", "print(jax.devices()[0].platform)"),
    "JAX_DISABLE_JIT=1": ("JAX_DISABLE_JIT", "1", "print(jax.config.jax_disable_jit)"),
}


def run(key: str, value: str, probe: str, before: bool, extra: dict | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env.update(extra or {})
    setting = f"os.environ[{key!r}] = {value!r}"
    code = (f"import os\n{setting}\nimport jax\n" if before else f"import os\nimport jax\n{setting}\n") + probe
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 else "fails (unknown backend)"


def main() -> None:
    for name, (key, value, probe) in CASES.items():
        print(f"{name} before import: {run(key, value, probe, True)}; after import: {run(key, value, probe, False)}")
    results = []
    for before in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            cache = os.path.join(tmp, "cache")
            probe = ("import jax.numpy as jnp\njax.jit(lambda x: jnp.sin(x) @ x.T)(jnp.ones((64, 64))).block_until_ready()\n"
                     f"print(len(os.listdir({cache!r})) if os.path.exists({cache!r}) else -1)")
            extra = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
            n = int(run("JAX_COMPILATION_CACHE_DIR", cache, probe, before, extra))
            results.append("no cache directory" if n < 0 else f"{n} cache entries")
    print(f"JAX_COMPILATION_CACHE_DIR before import: {results[0]}; after import: {results[1]}")


if __name__ == "__main__":
    main()
