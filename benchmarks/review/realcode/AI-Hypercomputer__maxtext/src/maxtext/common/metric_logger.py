# Copyright 2023–2025 Google LLC
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#    https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# pylint: disable=bare-except, consider-using-generator
# pytype: disable=attribute-error
"""Logger that saves metrics to a local file, GCS and TensorBoard."""

import json
import os
import sys
import queue
import enum

import numpy as np

import jax

from maxtext.utils.globals import EPS
from maxtext.common.gcloud_stub import mldiagnostics_modules
from maxtext.common.gcloud_stub import workload_monitor
from maxtext.common.managed_mldiagnostics import ManagedMLDiagnostics
from maxtext.utils import exceptions
from maxtext.utils import gcs_utils
from maxtext.utils import max_logging
from maxtext.utils import max_utils
from maxtext.utils import maxtext_utils
from maxtext.utils import elastic_utils
from collections import defaultdict

mldiag, _ = mldiagnostics_modules()
GCPWorkloadMonitor, _monitor_is_stub = workload_monitor()

# Mapping MaxText metrics to managed profiler metrics
_METRICS_TO_MANAGED = {
    "learning/current_learning_rate": "learning_rate",
    "learning/loss": "loss",
    "learning/grad_norm": "gradient_norm",
    "learning/total_weights": "total_weights",
    "perf/step_time_seconds": "step_time",
    "perf/per_device_tokens_per_sec": "throughput",
    "perf/per_device_tflops_per_sec": "tflops",
    # There are no mappings to the following metrics yet:
    # "latency", "mfu"
}


def _prepare_metrics_for_json(metrics, step, run_name):
  """Converts metric dictionary into json supported types (e.g. float)"""
  metrics_dict = {val: float(metrics["scalar"][val]) for val in metrics["scalar"]}
  metrics_dict["step"] = float(step)
  metrics_dict["run_name"] = run_name
  return metrics_dict


def record_activation_metrics(output_metrics, intermediate_outputs, config):
  """Adds the activation metrics to the metrics dict.

  Collects each metric by path suffix rather than a hardcoded path, so it works for
  both the Linen ("intermediates"-prefixed) and NNX (model-rooted) layouts and for
  both scanned (one stacked leaf) and unscanned (one leaf per layer) decoders.
  """
  for label, key in (
      ("activ_fraction_zero", "activation_fraction_zero"),
      ("activ_mean", "activation_mean"),
      ("activ_stdev", "activation_stdev"),
  ):
    vals = maxtext_utils.collect_intermediates_by_suffix(intermediate_outputs, key)
    if not vals:
      continue
    per_layer = jax.numpy.concatenate(vals)
    for layer_num in range(config.num_decoder_layers):
      output_metrics["scalar"][f"{label}/layer_{layer_num:03d}"] = per_layer[layer_num]


class MetadataKey(enum.Enum):
  PER_DEVICE_TFLOPS = "per_device_tflops"
  PER_DEVICE_TOKENS = "per_device_tokens"


class MetricLogger:
  """
  Logger for saving metrics to a local file, GCS and TensorBoard.
  """

  def __init__(self, config, learning_rate_schedule):
    self.writer = max_utils.initialize_summary_writer(config.tensorboard_dir, config.run_name, config.enable_tensorboard)
    self.config = config
    self.metadata = {}
    self.running_gcs_metrics = [] if config.gcs_metrics else None
    self.performance_metric_queue = self.get_performance_metric_queue(config)
    self.learning_rate_schedule = learning_rate_schedule
    self.cumulative_eval_metrics = {"scalar": defaultdict(float)}
    # self.buffered_metrics is a polymorphic deferred-write queue. Entries are one of:
    #   ("train", train_step, metrics, step_time_delta)
    #   ("eval", eval_step, metrics, step_time_delta)
    self.buffered_metrics = []
    # Number of eval steps accumulated since the last reset_eval_metrics(). Used by
    # buffer_and_write_metrics to detect the eval→train transition and trigger finalization.
    self._pending_eval_step_count = 0
    if self.config.managed_mldiagnostics:
      ManagedMLDiagnostics(config)  # Initialize the MLRun instance.

    if self.config.enable_wandb and jax.process_index() == 0:
      import wandb  # pylint: disable=import-outside-toplevel # pytype: disable=import-error # lazy import: wandb is an optional dependency

      wandb.init(
          project=config.wandb_project_name,
          name=config.wandb_run_name,
          resume="allow",
      )  # Initialize wandb logger.

  def reset_eval_metrics(self):
    """Resets the cumulative metrics dictionary for a new evaluation run."""
    self.cumulative_eval_metrics = {"scalar": defaultdict(float)}
    self._pending_eval_step_count = 0

  def write_metrics(self, metrics, step, metric_type="train"):
    """Entry point for all metrics writing. metric_type is one of 'train', 'eval', 'running_eval'."""
    if metrics:
      self.log_metrics(metrics, step, metric_type)

      if self.config.enable_tensorboard and metric_type != "running_eval":
        self.write_metrics_to_tensorboard(metrics, step, metric_type)

      if self.config.metrics_file:
        self.write_metrics_locally(metrics, step)

      if self.config.gcs_metrics and jax.process_index() == 0:
        self.write_metrics_for_gcs(metrics, step, metric_type)

      if self.config.managed_mldiagnostics:
        self.write_metrics_to_managed_mldiagnostics(metrics, step)

      if self.config.enable_wandb and jax.process_index() == 0:
        self.write_metrics_to_wandb(metrics, step)

      if metric_type == "train":
        self._maybe_abort_after_write_metrics(metrics)

  def log_metrics(self, metrics, step, metric_type):
    """Logs metrics via max_logging."""
    if metric_type == "train":
      self._log_training_metrics(metrics, step)
    elif metric_type == "running_eval":
      self._log_running_eval_metrics(metrics, step)
    else:
      self._log_eval_metrics(metrics, step)

  def _log_training_metrics(self, metrics, step):
    """Handles training-specific metric logging."""
    # Skip logging if in profiler activation/deactivation steps
    # TODO(b/456828037): Switch to subprocess profiling to avoid timing artifacts at boundary steps.
    scalars = metrics["scalar"]
    loss = scalars["learning/loss"]
    is_rampup = step < self.config.rampup_end_step
    is_metric_hidden_step = self.config.hide_profiler_step_metric and self._is_profiler_boundary_step(step)

    # Start building the log parts
    log_parts = []
    if is_rampup:
      log_parts.append("[Rampup Batch Size Phase]")

    if is_metric_hidden_step:
      log_parts.append(
          f"completed profiler activation/deactivation step: {step}",
      )
    else:
      log_parts.extend(
          [
              f"completed step: {step}",
              f"seconds: {scalars['perf/step_time_seconds']:.3f}",
          ]
      )
      if elastic_utils.elastic_enabled(self.config):
        log_parts.extend(
            [
                f"live slice count: {len(elastic_utils.live_slice_indices(self.config))}",
            ]
        )

    # Add performance metrics only if strictly NOT in rampup phase
    # TODO(b/452468482): Enable performance metric (TFLOPs, Tokens/s) tracking during batch size rampup.
    if not is_rampup and not is_metric_hidden_step:
      log_parts.extend(
          [
              f"TFLOP/s/device: {scalars['perf/per_device_tflops_per_sec']:.3f}",
              f"Tokens/s/device: {scalars['perf/per_device_tokens_per_sec']:.3f}",
          ]
      )

    lm_loss = scalars.get("learning/lm_loss", 0.0)
    perplexity = scalars.get("learning/perplexity", 0.0)
    log_parts.extend(
        [
            f"total_weights: {scalars['learning/total_weights']}",
            f"loss: {loss:.3f}",
            f"lm_loss: {lm_loss:.3f}",
            f"perplexity: {perplexity:.3f}",
        ]
    )
    if "learning/dpo_loss" in scalars:
      log_parts.append(f"dpo_loss: {scalars['learning/dpo_loss']:.3f}")
    if "learning/reward_accuracy" in scalars:
      log_parts.append(f"reward_accuracy: {scalars['learning/reward_accuracy']:.3f}")

    if self.config.num_experts > 1:
      moe_lb_loss = scalars.get("learning/moe_lb_loss", 0.0)
      log_parts.append(f"moe_lb_loss: {moe_lb_loss:.6f}")

    if getattr(self.config, "mtp_num_layers", 0) > 0:
      mtp_loss = scalars.get("learning/mtp_loss", 0.0)
      log_parts.append(f"main_model_loss: {loss - mtp_loss:.3f}")
      log_parts.append(f"mtp_loss: {mtp_loss:.3f}")

    if getattr(self.config, "use_indexer", False):
      indexer_l = scalars.get("learning/indexer_loss", 0.0)
      log_parts.append(f"indexer_loss: {float(indexer_l)}")

    max_logging.log(", ".join(log_parts))

  def _log_eval_metrics(self, metrics, step):
    """Logs the final accumulated eval summary at the end of an eval run."""
    scalars = metrics["scalar"]
    log_parts = [
        f"Completed eval after train step {step}",
        f"loss={scalars['eval/avg_loss']:.3f}",
        f"perplexity={scalars['eval/avg_perplexity']:.3f}",
        f"total_weights={scalars['eval/total_weights']}",
        f"avg_z_loss={scalars.get('eval/avg_z_loss', 0.0):.3f}",
    ]
    if self.config.num_experts > 1:
      log_parts.append(f"avg_moe_lb_loss={scalars['eval/avg_moe_lb_loss']:.3f}")
    if getattr(self.config, "mtp_num_layers", 0) > 0:
      log_parts.extend(
          [
              f"avg_mtp_loss={scalars['eval/avg_mtp_loss']:.3f}",
              f"avg_mtp_acceptance_rate={scalars['eval/avg_mtp_acceptance_rate_percent']:.2f}%",
          ]
      )
    if "eval/avg_dpo_reward_accuracy" in scalars:
      log_parts.append(f"dpo_reward_accuracy={scalars['eval/avg_dpo_reward_accuracy']:.3f}")

    if getattr(self.config, "use_indexer", False):
      indexer_l = scalars.get("eval/avg_indexer_loss", 0.0)
      log_parts.append(f"avg_indexer_loss={indexer_l:.3f}")

    max_logging.log(", ".join(log_parts))

  def _log_running_eval_metrics(self, metrics, step):
    """Logs a per-eval-step running average (deferred by one eval step)."""
    scalars = metrics["scalar"]
    log_parts = [
        f"Completed eval step: {step}",
        f"seconds: {scalars['eval/step_time_seconds']:.3f}",
        f"running loss={scalars['eval/avg_loss']:.3f}",
        f"running perplexity={scalars['eval/avg_perplexity']:.3f}",
        f"running total_weights={scalars['eval/total_weights']}",
    ]
    if getattr(self.config, "mtp_num_layers", 0) > 0:
      log_parts.extend(
          [
              f"running mtp_loss={scalars['eval/avg_mtp_loss']:.3f}",
              f"running mtp_acceptance_rate={scalars['eval/avg_mtp_acceptance_rate_percent']:.2f}%",
          ]
      )
    max_logging.log(", ".join(log_parts))

  def _is_profiler_boundary_step(self, step):
    """Determines if the current step is a profiler start/stop boundary that should be hidden."""
    if len(self.config.profiler) == 0:
      return False
    skip_steps = self.config.skip_first_n_steps_for_profiler
    profiler_steps = self.config.profiler_steps
    # Steps immediately before/at start, and at/immediately after end of profiling
    boundary_steps = {
        skip_steps,
        skip_steps + 1,
        skip_steps + profiler_steps,
        skip_steps + profiler_steps + 1,
    }
    return step in boundary_steps

  def _maybe_abort_after_write_metrics(self, metrics):
    """This function checks whether we have nan or inf values in training"""
    loss = metrics["scalar"].get("learning/loss")
    if self.config.abort_on_nan_loss and np.isnan(loss):
      max_logging.log("Aborting training due to NaN loss.")
      sys.exit(1)
    if self.config.abort_on_inf_loss and np.isinf(loss):
      max_logging.log("Aborting training due to Inf loss.")
      sys.exit(1)

  def write_metrics_locally(self, metrics, step):
    """Writes metrics locally for testing."""
    with open(self.config.metrics_file, "a", encoding="utf8") as local_metrics_file:
      if step == 0:
        local_metrics_file.truncate(0)

      metrics_dict = _prepare_metrics_for_json(metrics, step, self.config.run_name)
      local_metrics_file.write(str(json.dumps(metrics_dict)) + "\n")

  def write_metrics_for_gcs(self, metrics, step, metric_type):
    """Writes metrics to GCS."""
    metrics_dict_step = _prepare_metrics_for_json(metrics, step, self.config.run_name)
    self.running_gcs_metrics.append(metrics_dict_step)
    if metric_type == "train" and (step + 1) % self.config.log_period == 0 or step == self.config.steps - 1:
      start_step = (step // self.config.log_period) * self.config.log_period
      metrics_filename = f"metrics_step_{start_step:06}_to_step_{step:06}.txt"
      with open(metrics_filename, "wt", encoding="utf8") as metrics_for_gcs:
        for metrics_step in self.running_gcs_metrics:
          metrics_for_gcs.write(str(json.dumps(metrics_step)) + "\n")

      gcs_filename = os.path.join(self.config.metrics_dir, metrics_filename)
      max_logging.log(f"Moving file {metrics_filename} to GCS...")
      gcs_utils.upload_blob(gcs_filename, metrics_filename)
      max_logging.log(f"File {metrics_filename} moved successfully!")
      self.running_gcs_metrics = []  # reset running_metrics to empty list

  def write_metrics_to_tensorboard(self, metrics, step, metric_type):
    """Writes metrics to TensorBoard."""
    if jax.process_index() == 0:
      for metric_name in metrics.get("scalar", []):
        self.writer.add_scalar(metric_name, np.array(metrics["scalar"][metric_name]), step)
      for metric_name in metrics.get("scalars", []):
        self.writer.add_scalars(metric_name, metrics["scalars"][metric_name], step)

    if metric_type == "train":
      full_log = step % self.config.log_period == 0

      if full_log and jax.process_index() == 0:
        max_logging.log(f"To see full metrics 'tensorboard --logdir={self.config.tensorboard_dir}'")
        self.writer.flush()

  def write_metrics_to_managed_mldiagnostics(self, metrics, step):
    """Write metrics to managed profiler."""
    if (step + 1) % self.config.log_period == 0 or step == self.config.steps - 1:
      for metric_name in metrics.get("scalar", []):
        value = metrics["scalar"][metric_name]
        # For NumPy/JAX array objects (including single-element arrays), use .item()
        # to extract the native Python scalar.
        if hasattr(value, "item"):
          value = value.item()
        mapped_metric_name = _METRICS_TO_MANAGED.get(metric_name, metric_name)
        mldiag.metrics.record(mapped_metric_name, value, step=int(step))

  def write_metrics_to_wandb(self, metrics, step):
    """Write metrics to weights and biases (wandb)."""
    import wandb  # pylint: disable=import-outside-toplevel # pytype: disable=import-error # lazy import: wandb is an optional dependency

    flat_metrics = {}
    for key, val in metrics.get("scalar", {}).items():
      flat_metrics[key] = float(val)
    for key, val in metrics.get("scalars", {}).items():
      for subkey, subval in val.items():
        flat_metrics[f"{key}/{subkey}"] = float(subval)
    wandb.log(flat_metrics, step=step)

  def write_setup_info_to_tensorboard(self, params):
    """Writes setup information like train config params, num model params, and XLA flags to TensorBoard."""
    num_model_parameters = max_utils.calculate_num_params_from_pytree(params)
    self.metadata[MetadataKey.PER_DEVICE_TFLOPS], _, _ = maxtext_utils.calculate_tflops_training_per_device(self.config)
    self.metadata[MetadataKey.PER_DEVICE_TOKENS] = maxtext_utils.calculate_tokens_training_per_device(self.config)
    max_logging.log(f"number parameters: {num_model_parameters/1e9:.3f} billion")
    if not self.config.enable_tensorboard:
      return
    max_utils.add_text_to_summary_writer("num_model_parameters", str(num_model_parameters), self.writer)
    max_utils.add_text_to_summary_writer("libtpu_init_args", os.getenv("LIBTPU_INIT_ARGS", ""), self.writer)
    maxtext_utils.add_config_to_summary_writer(self.config, self.writer)

  def get_performance_metric_queue(self, config):
    """Records heartbeat metrics and performance metrics to GCP."""
    performance_metric_queue = None

    # Early return if monitoring is stubbed
    if _monitor_is_stub:
      if config.report_heartbeat_metric_for_gcp_monitoring or config.report_performance_metric_for_gcp_monitoring:
        max_logging.log("[DECOUPLED NO-OP] skipping GCP workload monitoring threads.")
      return performance_metric_queue

    if config.report_heartbeat_metric_for_gcp_monitoring or config.report_performance_metric_for_gcp_monitoring:
      gcp_workload_monitor = GCPWorkloadMonitor(config.run_name)
      if config.report_heartbeat_metric_for_gcp_monitoring:
        gcp_workload_monitor.start_heartbeat_reporting_thread(config.heartbeat_reporting_interval_in_seconds)
      if config.report_performance_metric_for_gcp_monitoring:
        performance_metric_queue = queue.Queue()
        gcp_workload_monitor.start_performance_reporting_thread(performance_metric_queue)
    return performance_metric_queue

  def buffer_and_write_metrics(self, metrics, step, step_time_delta=None, is_training=True):
    """
    Per-step entry point for both train and eval metrics. Flushes the single deferred entry from
    the previous call, then queues this step's metrics. The buffer is a queue of length 1: a new
    call means the previous dispatch is already submitted, so its result is safe to materialize.

    For train, record_train_metrics runs eagerly on the current step so the tiny JAX op it
    enqueues for self.learning_rate_schedule(step) lands on the device queue BEFORE the next
    iteration dispatches p_train_step. If we deferred it to flush time, lr_schedule(step) would
    be queued behind the just-dispatched next training step and materializing
    learning/current_learning_rate at the next flush would have to wait for that next step to
    finish, doubling the host-side block per iteration and starving the device.

    For eval, _accumulate_eval_metrics (which calls float() on JAX arrays) stays deferred to
    _flush_one_buffered_entry so the eval dispatch loop is not serialized.
    """
    if self.buffered_metrics:
      self._flush_one_buffered_entry(self.buffered_metrics.pop(0))
    if is_training:
      self.record_train_metrics(metrics, step, step_time_delta.total_seconds())
      self.buffered_metrics.append(("train", step, metrics, step_time_delta))
      if self._pending_eval_step_count > 0:
        self._finalize_eval_metrics(step)
    else:
      self._pending_eval_step_count += 1
      self.buffered_metrics.append(("eval", step, metrics, step_time_delta))

  def _flush_one_buffered_entry(self, entry):
    """Dispatches a single buffered entry to the writer."""
    kind = entry[0]
    if kind == "train":
      _, step, metrics, _ = entry
      self.write_metrics(metrics, step)
    elif kind == "eval":
      _, eval_step, raw_metrics, step_time_delta = entry
      # _accumulate_eval_metrics calls float() that materialize the metrics, deferred to here
      self._accumulate_eval_metrics(raw_metrics)
      running_count = eval_step + 1  # eval_step is 0-indexed
      cumulative = self.cumulative_eval_metrics["scalar"]
      running_avg_loss = cumulative["eval/total_loss"] / (cumulative["eval/total_weights"] + EPS)
      snapshot = {
          "scalar": {
              "eval/avg_loss": running_avg_loss,
              "eval/avg_perplexity": np.exp(running_avg_loss),
              "eval/total_weights": cumulative["eval/total_weights"],
              "eval/avg_mtp_loss": cumulative["eval/mtp_loss"] / running_count,
              "eval/avg_mtp_acceptance_rate_percent": (cumulative["eval/mtp_acceptance_rate_percent"] / running_count),
              "eval/step_time_seconds": step_time_delta.total_seconds(),
          }
      }
      self.write_metrics(snapshot, eval_step, metric_type="running_eval")

  def _accumulate_eval_metrics(self, metrics):
    """Accumulates one eval step's raw metrics into cumulative_eval_metrics (eager float())."""
    scalar = metrics.get("scalar", {})
    self.cumulative_eval_metrics["scalar"]["eval/total_loss"] += float(scalar.get("evaluation/total_loss", 0.0))
    self.cumulative_eval_metrics["scalar"]["eval/total_weights"] += float(scalar.get("evaluation/total_weights", 0.0))
    self.cumulative_eval_metrics["scalar"]["eval/moe_lb_loss"] += float(scalar.get("evaluation/moe_lb_loss", 0.0))
    self.cumulative_eval_metrics["scalar"]["eval/indexer_loss"] += float(scalar.get("evaluation/indexer_loss", 0.0))
    self.cumulative_eval_metrics["scalar"]["eval/mtp_loss"] += float(scalar.get("evaluation/mtp_loss", 0.0))
    self.cumulative_eval_metrics["scalar"]["eval/mtp_acceptance_rate_percent"] += float(
        scalar.get("evaluation/mtp_acceptance_rate_percent", 0.0)
    )
    self.cumulative_eval_metrics["scalar"]["eval/z_loss"] += float(scalar.get("evaluation/z_loss", 0.0))

  def record_train_metrics(self, metrics, step, step_time):
    """Records training metrics for the current step."""
    metrics["scalar"].update({"perf/step_time_seconds": step_time})
    metrics["scalar"].update({"learning/current_learning_rate": self.learning_rate_schedule(step)})
    if step >= self.config.rampup_end_step:
      metrics["scalar"].update({"perf/per_device_tflops": self.metadata[MetadataKey.PER_DEVICE_TFLOPS]})
      metrics["scalar"].update(
          {"perf/per_device_tflops_per_sec": (self.metadata[MetadataKey.PER_DEVICE_TFLOPS] / step_time)}
      )
      metrics["scalar"].update({"perf/per_device_tokens": self.metadata[MetadataKey.PER_DEVICE_TOKENS]})
      metrics["scalar"].update(
          {"perf/per_device_tokens_per_sec": (self.metadata[MetadataKey.PER_DEVICE_TOKENS] / step_time)}
      )
    if self.performance_metric_queue:
      self.performance_metric_queue.put(step_time)

  def _finalize_eval_metrics(self, train_step):
    """Computes final averaged eval metrics and writes them at train_step."""
    eval_step_count = self._pending_eval_step_count
    cumulative = self.cumulative_eval_metrics["scalar"]
    eval_loss = cumulative["eval/total_loss"] / (cumulative["eval/total_weights"] + EPS)
    cumulative["eval/avg_loss"] = eval_loss
    cumulative["eval/avg_perplexity"] = np.exp(eval_loss)
    cumulative["eval/avg_moe_lb_loss"] = cumulative["eval/moe_lb_loss"] / eval_step_count
    cumulative["eval/avg_indexer_loss"] = cumulative["eval/indexer_loss"] / eval_step_count
    cumulative["eval/avg_mtp_loss"] = cumulative["eval/mtp_loss"] / eval_step_count
    cumulative["eval/avg_mtp_acceptance_rate_percent"] = cumulative["eval/mtp_acceptance_rate_percent"] / eval_step_count
    cumulative["eval/avg_z_loss"] = cumulative["eval/z_loss"] / eval_step_count

    self.write_metrics(self.cumulative_eval_metrics, train_step, metric_type="eval")
    self._pending_eval_step_count = 0
    if self.config.target_eval_loss and eval_loss <= self.config.target_eval_loss:
      raise exceptions.StopTraining(f"Target loss {self.config.target_eval_loss=} is achieved.")

  def flush_metrics_and_cleanup(self):
    """
    This is a terminal operation that uploads any buffered metrics to GCS
    and/or TensorBoard before closing the writer objects. Once called, the
    logger instance should not be used to add or write more metrics as the
    underlying writer objects (e.g., TensorBoard SummaryWriter) will be closed.
    """
    for entry in self.buffered_metrics:
      self._flush_one_buffered_entry(entry)
    self.buffered_metrics = []

    max_utils.close_summary_writer(self.writer)
