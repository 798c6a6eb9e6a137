"""JAX's configuration options, and when the `JAX_*` environment variables behind them are read.

Every option `jax_<name>` (jax/_src/config.py) takes its default from the environment variable
`JAX_<NAME>` once, when `jax` is imported: set after `import jax`, the variable has no effect, even
before any backend starts (measured on jax 0.10.2 for JAX_PLATFORMS, JAX_ENABLE_X64,
JAX_DISABLE_JIT, JAX_LOG_COMPILES, JAX_COMPILATION_CACHE_DIR, JAX_DEBUG_NANS and
JAX_TRACEBACK_FILTERING: set before the import each takes effect, after it none does;
benchmarks/claims/jm601_jax_config_env_at_import.py repeats four of them). The
`XLA_*` variables are different: the backend reads them when it starts (rules/
xla_env_after_backend_start.py). The option names are jax 0.10.2's (`jax.config.values`); a
variable for an option this list lacks is not reported (tests/review/test_semantic.py checks the
list against the installed jax).
"""
from __future__ import annotations

import ast

OPTIONS = frozenset((
    'allow_f16_reductions', 'array_garbage_collection_guard', 'auto_pcast', 'backend_target',
    'bcoo_cusparse_lowering', 'captured_constants_report_frames', 'captured_constants_warn_bytes',
    'check_proxy_envs', 'check_static_indices', 'check_tracer_leaks', 'compilation_cache_check_contents',
    'compilation_cache_dir', 'compilation_cache_expect_pgle', 'compilation_cache_include_metadata_in_key',
    'compilation_cache_max_size', 'compiler_detailed_logging_min_ops', 'compiler_enable_remat_pass',
    'cpu_collectives_implementation', 'cpu_enable_async_dispatch', 'cpu_get_global_topology_timeout_minutes',
    'cpu_get_local_topology_timeout_minutes', 'cross_host_transfer_socket_address',
    'cross_host_transfer_timeout_seconds', 'cross_host_transfer_transfer_size',
    'cross_host_transport_addresses', 'cuda_visible_devices', 'custom_vjp3', 'debug_infs', 'debug_key_reuse',
    'debug_leaked_clients_on_clear_backends', 'debug_log_modules', 'debug_nans', 'default_device',
    'default_matmul_precision', 'default_prng_impl', 'disable_bwd_checks', 'disable_jit',
    'disable_most_optimizations', 'disable_vmap_shmap_error', 'disallow_mesh_context_manager',
    'distributed_debug', 'dump_ir_modes', 'dump_ir_to', 'embedded_constants_max_bytes', 'enable_checks',
    'enable_compilation_cache', 'enable_custom_prng', 'enable_pgle', 'enable_preemption_service',
    'enable_recoverability', 'enable_x64', 'error_checking_behavior_divide', 'error_checking_behavior_nan',
    'error_checking_behavior_oob', 'exec_time_optimization_effort', 'experimental_unsafe_xla_runtime_errors',
    'explain_cache_misses', 'explicit_x64_dtypes', 'export_calling_convention_version',
    'export_ignore_forward_compatibility', 'force_dcn_cross_host_transfers', 'high_dynamic_range_gumbel',
    'hlo_source_file_canonicalization_regex', 'include_debug_info_in_dumps',
    'include_full_tracebacks_in_locations', 'legacy_prng_key', 'log_checkpoint_residuals', 'log_compiles',
    'logging_level', 'memory_fitting_effort', 'memory_fitting_level', 'mock_gpu_topology', 'mosaic_allow_hlo',
    'mutable_array_checks', 'no_execution', 'no_tracing', 'num_cpu_devices', 'numpy_dtype_promotion',
    'numpy_rank_promotion', 'oneapi_visible_devices', 'optimization_level', 'pallas_enable_debug_checks',
    'pallas_poison_buffers', 'pallas_use_mosaic_gpu', 'pallas_verbose_errors',
    'persistent_cache_enable_xla_caches', 'persistent_cache_min_compile_time_secs',
    'persistent_cache_min_entry_size_bytes', 'pgle_aggregation_percentile', 'pgle_profiling_runs',
    'pjrt_client_create_options', 'platform_name', 'platforms', 'pprint_use_color',
    'ragged_dot_use_gpu_pallas_triton_lowering', 'ragged_dot_use_ragged_dot_instruction',
    'raise_persistent_cache_errors', 'random_seed_offset', 'refs_to_pins', 'remat3',
    'remove_custom_partitioning_ptr_from_cache_key', 'remove_size_one_mesh_axis_from_type',
    'rocm_visible_devices', 'scan3', 'send_traceback_to_runtime', 'serialization_version',
    'share_binary_between_hosts', 'share_binary_between_hosts_timeout_ms', 'softmax_custom_jvp',
    'sort_devices_by_process_index', 'source_url_schema', 'thread_guard', 'threefry_gpu_kernel_lowering',
    'threefry_partitionable', 'traceback_filtering', 'traceback_in_locations_limit',
    'tracer_error_num_traceback_frames', 'transfer_guard', 'transfer_guard_device_to_device',
    'transfer_guard_device_to_host', 'transfer_guard_host_to_device', 'use_direct_linearize',
    'use_emit_pipeline_primitive', 'use_magma', 'use_shardy_partitioner', 'use_simplified_jaxpr_constants',
    'xla_backend', 'xla_profile_version'
))


def config_option(key: str) -> str | None:
    """`JAX_ENABLE_X64` -> "jax_enable_x64" when it names one of JAX's configuration options."""
    if not key.startswith("JAX_") or key != key.upper():
        return None
    name = key[4:].lower()
    return "jax_" + name if name in OPTIONS else None


# Options that choose the same thing: setting either through jax.config covers the other's variable.
_SAME = {"jax_platform_name": "jax_platforms", "jax_platforms": "jax_platform_name"}


def module_imports_jax(tree: ast.Module) -> int | None:
    """The line of the module's first own unconditional `import jax...` / `from jax... import` (a
    statement of its top level, or the body of a top-level `try`): after it, every function of the
    module runs with jax imported. An import under an `if` may not run."""
    stack = list(reversed(tree.body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Import) and any(a.name.split(".")[0] == "jax" for a in stmt.names):
            return stmt.lineno
        if isinstance(stmt, ast.ImportFrom) and not stmt.level and (stmt.module or "").split(".")[0] == "jax":
            return stmt.lineno
        if isinstance(stmt, ast.Try):
            stack.extend(reversed(stmt.body))
    return None


def updated_options(a) -> set[str]:
    """Options the module (`a`, its model) sets with `jax.config.update("jax_...", value)`
    anywhere, once per file: the same setting written to the environment as well (a common
    belt-and-braces pair) loses nothing."""
    if "jax_config_updates" not in a.memo:
        out = set()
        for n in ast.walk(a.tree):
            if (isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant)
                    and isinstance(n.args[0].value, str) and a.qualname(n.func) == "jax.config.update"):
                out.add(n.args[0].value)
                if n.args[0].value in _SAME:
                    out.add(_SAME[n.args[0].value])
        a.memo["jax_config_updates"] = out
    return a.memo["jax_config_updates"]


# The NaN/Inf checker's configuration options, the environment variables JAX reads them from at
# import, and the texts those variables take for "on" (JM607, JM701/JM704, regions.debug_checks).
DEBUG_CHECKS = frozenset({"jax_debug_nans", "jax_debug_infs"})
DEBUG_CHECK_VARS = frozenset({"JAX_DEBUG_NANS", "JAX_DEBUG_INFS"})
TRUE_TEXT = frozenset({"1", "true", "True", "TRUE", "yes"})


def checks_outputs(a) -> bool:
    """The module turns on `jax_debug_nans` or `jax_debug_infs` (`jax.config.update(..., True)`,
    or `JAX_DEBUG_NANS` written to `os.environ`): JAX then checks every jitted computation's and
    every eager operation's outputs for NaN/inf on the host before the call returns (the debugging
    flags guide: a NaN output of a jitted function re-runs it eagerly to raise where it appeared),
    so each call has waited for its work; a timer around it measures the work, not dispatch."""
    if "checks_outputs" not in a.memo:
        found = False
        # The text first: walking every tree for a flag few files set cost a tenth of a review.
        mentioned = any("debug_nans" in line or "debug_infs" in line or "DEBUG_NANS" in line or "DEBUG_INFS" in line
                        for line in a.lines)
        for n in ast.walk(a.tree) if mentioned else ():
            if isinstance(n, ast.Call) and len(n.args) == 2 and isinstance(n.args[0], ast.Constant) \
                    and n.args[0].value in DEBUG_CHECKS and a.qualname(n.func) == "jax.config.update":
                value = n.args[1]
                found = isinstance(value, ast.Constant) and (value.value is True or value.value == 1
                                                             or value.value in TRUE_TEXT)
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Subscript) \
                    and a.qualname(n.targets[0].value) == "os.environ":
                key, value = n.targets[0].slice, n.value
                found = (isinstance(key, ast.Constant) and key.value in DEBUG_CHECK_VARS
                         and isinstance(value, ast.Constant) and value.value in TRUE_TEXT)
            if found:
                break
        a.memo["checks_outputs"] = found
    return a.memo["checks_outputs"]
