"""JM601's claim, checked: XLA_FLAGS set after `import jax` still works until a backend starts.

    python benchmarks/claims/jm601_env_after_import.py

Each case runs in a fresh interpreter. Output on jax 0.10.2, CPU:

    set after import jax, nothing started: 4 devices
    set after jax.config.update: 4 devices
    set after jnp.ones(3): 1 devices
    set after jax.default_backend(): 1 devices
"""
from __future__ import annotations

import subprocess
import sys

FLAG = "os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=4'"
CASES = {
    "set after import jax, nothing started": "",
    "set after jax.config.update": "jax.config.update('jax_platforms', 'cpu')",
    "set after jnp.ones(3)": "jnp.ones(3)",
    "set after jax.default_backend()": "jax.default_backend()",
}


def main() -> None:
    for label, before in CASES.items():
        code = f"import os\nimport jax\nimport jax.numpy as jnp\n{before}\n{FLAG}\nprint(len(jax.devices()))\n"
        env = {k: v for k, v in __import__("os").environ.items() if k != "XLA_FLAGS"}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        print(f"{label}: {out.stdout.strip() or out.stderr.strip()[-200:]} devices")


if __name__ == "__main__":
    main()
