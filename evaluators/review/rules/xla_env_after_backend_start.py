"""JM601 xla-env-after-backend-start

What it does
    Flags a `JAX_*` configuration variable (`JAX_PLATFORMS`, `JAX_ENABLE_X64`, ...) set after
    the module's own `import jax`: JAX reads those when it is imported (measured on jax 0.10.2:
    semantic/jax_config.py). And module code that sets an `XLA_*` variable
    (`XLA_PYTHON_CLIENT_PREALLOCATE`, `XLA_PYTHON_CLIENT_MEM_FRACTION`,
    `XLA_PYTHON_CLIENT_ALLOCATOR`, `XLA_FLAGS`, ...), `TF_GPU_ALLOCATOR`, or one of CUDA's
    device variables (`CUDA_VISIBLE_DEVICES`, `CUDA_DEVICE_ORDER`) in `os.environ` after
    something in the module has started a JAX
    backend: a JAX operation (`jnp.ones`, `jax.random.key`), `jax.devices()`,
    `jax.device_count()`, `jax.default_backend()`, a jitted call, or a module function that
    does one of those. Not flagged: a write followed, in the same function or module code, by
    the start of a child process (`subprocess.*`, `os.system`, `multiprocessing`), which reads
    the environment afresh.

Why is this bad
    `JAX_*` configuration variables are read once, at `import jax`: `JAX_ENABLE_X64=1` set after
    it leaves 64-bit mode off (measured), `JAX_PLATFORMS=cpu` leaves a GPU as the default device
    (a GPU-only effect, not measurable here). The `XLA_*` variables are read once, when the
    backend starts (the first operation or device query), not at import. Set after that they are
    silently ignored. CUDA reads `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` once, when the
    driver initialises (CUDA C Programming Guide, "CUDA Environment Variables"), which JAX's
    GPU backend does when it starts: set later, the process keeps every GPU (and JAX's first
    array preallocates on the default one). A GPU-only effect, not measurable here. Set after
    `import jax`
    but before anything starts a backend they still work: verified on jax 0.10.2, where
    `XLA_FLAGS=--xla_force_host_platform_device_count=4` set after `import jax` gave 4 CPU
    devices, and 1 when a `jnp.ones(3)` ran first. (On the CPU backend the
    `XLA_PYTHON_CLIENT_*` variables have no effect at all.)

Example
    import jax
    print(jax.devices())
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"

Use instead
    import os
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"   # before jax is imported (safest)
    import jax
    print(jax.devices())
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, describe, env_writes, in_module_code
from jaxmem.evaluators.review.semantic.jax_config import config_option, module_imports_jax, updated_options
from jaxmem.evaluators.review.semantic.names import JAX_ARRAY_PREFIXES, JAX_NON_ARRAY

# Calls that start a backend (device queries and anything that makes an array).
STARTS_BACKEND = frozenset({
    "jax.devices", "jax.local_devices", "jax.device_count", "jax.local_device_count", "jax.default_backend",
    "jax.process_index", "jax.process_count", "jax.device_put", "jax.live_arrays", "jax.block_until_ready",
    "jax.extend.backend.get_backend", "jax.lib.xla_bridge.get_backend", "jax.make_mesh",
})


# Read by the CUDA driver when it initialises, which the GPU backend's start does.
CUDA_KEYS = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})
# Calls that start another process, which reads the environment as it is then.
CHILD_PROCESS_PREFIXES = ("subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "multiprocessing.")
CHILD_PROCESS_CALLS = frozenset({"os.system", "os.popen", "os.fork"})


def topic_for(key: str) -> str:
    if key in CUDA_KEYS:
        return "gpu-sharing-mps-mig"
    if "MEM_FRACTION" in key:
        return "gpu-memory-fraction"
    if "ALLOCATOR" in key:
        return "gpu-allocator"
    return "gpu-preallocation"


class XlaEnvAfterBackendStart(Rule):
    code = "JM601"
    needs_jax = False  # an environment variable the process reads, whatever this file imports
    name = "xla-env-after-backend-start"
    topic = "gpu-preallocation"
    severity = "warning"
    message = "`{key}` is set after a JAX backend started (line {line}: `{what}`): the backend read its settings then, so this has no effect"
    fix = "Set the variable before anything touches a device: at the top of the entry script (before `import jax` is safest) or in the environment that launches Python."
    node_types = (ast.Assign, ast.Call)
    call_names = ENV_CALLS
    requires = ('XLA_', 'TF_GPU_ALLOCATOR', 'JAX_', 'CUDA_')
    import_message = ("`{key}` is set after `import jax` (line {line}): JAX reads its `JAX_*` configuration variables "
                      "when it is imported, so this has no effect")
    import_fix = ("Set it before `import jax` (or in the environment that launches Python), or call "
                  "`jax.config.update(\"{option}\", ...)` before anything touches a device.")

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        first = ctx.analysis.imports_jax_line
        if first is None or node.lineno <= first:
            return
        writes = env_writes(ctx, node)
        self._after_import(node, [k for k, _v in writes if config_option(k)], ctx)
        keys = [k for k, _v in writes if k.startswith("XLA_") or k == "TF_GPU_ALLOCATOR" or k in CUDA_KEYS]
        if not keys or self._child_follows(ctx, node):
            return
        if in_module_code(ctx):
            started = self._backend_start(ctx, first, node)
        elif isinstance(ctx.scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not ctx.scope.traced:
            # Inside a function: an earlier statement of the same function started a backend (ran
            # a JAX operation or a jitted call) before the variable is set.
            started = self._started_in_function(ctx, node)
        else:
            return
        if started is None:
            return
        for key in keys:
            ctx.report(self, node, topic=topic_for(key), key=key, line=started.lineno, what=describe(started))

    def _after_import(self, node: ast.AST, keys: list[str], ctx: Ctx) -> None:
        """`JAX_*` configuration variables are read at `import jax` (semantic/jax_config.py): set in
        module code after the module's own import, or in a function of a module that imports jax
        at its top level (the function runs after that import), they change nothing."""
        a = ctx.analysis
        if keys and any("update(" in line for line in a.lines):
            keys = [k for k in keys if config_option(k) not in updated_options(a)]
        if not keys:
            return
        imported = module_imports_jax(a.tree)
        if imported is None or (in_module_code(ctx) and node.lineno <= imported):
            return
        if not in_module_code(ctx) and (ctx.scope.traced or not isinstance(
                ctx.scope.node, (ast.FunctionDef, ast.AsyncFunctionDef))):
            return
        for key in keys:
            option = config_option(key)
            ctx.report(self, node, message=self.import_message, fix=self.import_fix, key=key, line=imported,
                       option=option, topic="mixed-precision" if option == "jax_enable_x64" else None)

    def _child_follows(self, ctx: Ctx, node: ast.AST) -> bool:
        """A process started after the write in the same function (or module code) inherits the
        environment as it is then: the setting is for it (`os.environ["CUDA_VISIBLE_DEVICES"] = str(i)`
        before `subprocess.Popen(...)`), not for this process's backend."""
        scope = ctx.scope.node
        body = ctx.analysis.tree.body if in_module_code(ctx) else getattr(scope, "body", [])
        after = (node.lineno, node.col_offset)
        for stmt in body:
            if getattr(stmt, "end_lineno", stmt.lineno) < node.lineno:
                continue
            for call in _calls(stmt):
                if (call.lineno, call.col_offset) <= after:
                    continue
                q = ctx.qualname(call.func) or ""
                if q in CHILD_PROCESS_CALLS or q.startswith(CHILD_PROCESS_PREFIXES):
                    return True
        return False

    def _backend_start(self, ctx: Ctx, after: int, node: ast.AST) -> ast.Call | None:
        """The first call in module code after line `after` and before `node` that starts a
        backend. By position, not by statement: `if mock: os.environ[...] = ...` followed in the
        same block by `jax.local_devices()` starts the backend after the setting, not before."""
        limit = (node.lineno, node.col_offset)
        for stmt in ctx.analysis.tree.body:
            if stmt.lineno <= after or (stmt.lineno, stmt.col_offset) > limit:
                continue
            for call in _calls(stmt):
                if (call.lineno, call.col_offset) < limit and self._starts(call, ctx, depth=0):
                    return call
        return None

    def _started_in_function(self, ctx: Ctx, node: ast.AST) -> ast.Call | None:
        limit = (node.lineno, node.col_offset)
        for stmt in astutil.statements(ctx.scope.node):
            for call in _calls(stmt):
                if (call.lineno, call.col_offset) < limit and self._starts(call, ctx, depth=0, scope=ctx.scope):
                    return call
        return None

    def _starts(self, call: ast.Call, ctx: Ctx, depth: int, scope=None) -> bool:
        a = ctx.analysis
        scope = scope or a.module_scope
        q = a.qualname(call.func)
        if q is not None:
            return q in STARTS_BACKEND or (q.startswith(JAX_ARRAY_PREFIXES) and q not in JAX_NON_ARRAY)
        if a.jit_info(call.func, scope) is not None:
            return True
        if depth == 0:
            fn = a.resolve_def(call.func, scope)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return any(self._starts(c, ctx, 1) for stmt in fn.body for c in _calls(stmt))
        return False


def _calls(stmt: ast.AST):
    """Calls a statement makes when it runs (not those inside functions or classes it defines)."""
    stack = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(getattr(n, "decorator_list", ()))
            continue
        if isinstance(n, ast.Call):
            yield n
        stack.extend(astutil.children(n))


RULE = XlaEnvAfterBackendStart()
