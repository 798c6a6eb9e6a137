# Copyright 2023–2026 Google LLC
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

# pylint: disable=g-bad-todo, abstract-method, consider-using-with
"""Training loop and Decoding of the model."""

# Calling jax.device_count here prevents a "TPU platform already registered" error.
# See github.com/google/maxtext/issues/20 for more

from typing import Any, Sequence
import datetime
import functools
import os

from absl import app

import optax

import pathwaysutils  # pylint: disable=unused-import

try:
  import tensorflow as tf

  _TF_AVAILABLE = True
except ImportError:
  _TF_AVAILABLE = False

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding

from flax import linen as nn, nnx, traverse_util
from flax.linen import partitioning as nn_partitioning
from flax.nnx import variablelib

from maxtext.configs import pyconfig
from maxtext.configs.types import TeCommGemmOverlapPolicy
from maxtext.diffusion.block_diffusion import target_alignment as block_diffusion_target_alignment
from maxtext.utils.globals import EPS
from maxtext.utils import elastic_utils
# Placeholder: internal

# pylint: disable=too-many-positional-arguments
from maxtext.layers.multi_token_prediction import calculate_mtp_acceptance_rate, calculate_mtp_loss, mtp_acceptance, mtp_losses
from maxtext.layers.attention_mla import indexer_losses
from maxtext.common import checkpointing, profiler
from maxtext.common.goodput import (
    GoodputEvent,
    RECORD_JOB_END_TIME,
    RECORD_JOB_START_TIME,
    create_goodput_recorder,
    maybe_monitor_goodput,
    maybe_record_goodput,
    record_goodput,
)
from maxtext.common.gcloud_stub import vertex_tensorboard_modules
from maxtext.common import metric_logger
from maxtext.common.metric_logger import record_activation_metrics
from maxtext.utils import exceptions
from maxtext.utils import gcs_utils
from maxtext.utils import max_logging
from maxtext.utils import max_utils
from maxtext.utils import maxtext_utils
from maxtext.utils import qk_clip_utils
from maxtext.utils import sharding
from maxtext.utils import maxtext_utils_nnx
from maxtext.utils import train_utils
from maxtext.utils.gradient_accumulation import gradient_accumulation_loss_and_grad
from maxtext.utils.vocabulary_tiling import vocab_tiling_linen_loss, vocab_tiling_nnx_loss

VertexTensorboardManager, _vertex_tb_is_stub = vertex_tensorboard_modules()


def get_first_step(model, state):
  if isinstance(model, nn.Module):
    return int(state.step)
  if hasattr(state, "inner_state"):  # DiLoCoTrainState (NNX DiLoCo)
    step_val = state.step.get_value() if hasattr(state.step, "get_value") else state.step
    return int(step_val)
  return int(state.optimizer.step.get_value())


# -----------------------------------------------------------------------------
# Top-level Functions
# -----------------------------------------------------------------------------


def loss_fn(model, config, data, dropout_rng, params, sparsity_state=None, is_train=True):
  """loss_fn for both train and eval.

  Args:
    model: A nn.Module (Linen) or nnx.Module (NNX).
    config: Config of parameters
    data: Batch of data to apply to the model
    dropout_rng: A key to use to generate rng for dropout (Linen); unused for NNX.
    params: Model params (Linen); unused for NNX (params are part of the model).
    is_train: True for train_step and False for eval_step

  Returns:
    loss: average loss
    aux: a dictionary including intermediate_outputs, xent_sum, and total_weights
  """
  is_block_diffusion = getattr(config, "training_objective", "causal_lm") == "block_diffusion"
  if getattr(config, "attention_type", "global") == "block_diffusion" and not is_block_diffusion:
    raise ValueError(
        "Block-diffusion attention requires target-aligned block-diffusion losses; "
        "causal next-token labels would leak within a bidirectional block."
    )
  if is_block_diffusion:
    required_masks = {"corruption_mask", "targets_loss_mask"}
    missing_masks = required_masks - data.keys()
    if missing_masks:
      raise ValueError(f"Block-diffusion loss requires explicit batch masks; missing {sorted(missing_masks)}")
    target_shape = data["targets"].shape
    for mask_name in required_masks:
      if data[mask_name].shape != target_shape:
        raise ValueError(f"{mask_name} must match targets shape; got {data[mask_name].shape} and {target_shape}")

  # decimate proportion of data when per_device_batch_size<1
  if is_train:
    for k, v in data.items():
      data[k] = v[: config.micro_batch_size_to_train_on, :]
  else:
    for k, v in data.items():
      data[k] = v[: config.micro_batch_size_to_eval_on, :]
  if is_block_diffusion:
    targets_loss_mask = (data["targets_loss_mask"] != 0) & (data["targets_segmentation"] != 0)
    target_positions = data.get("targets_position", data["inputs_position"])
  else:
    targets_loss_mask = None
    target_positions = None
  # A multimodal model may receive a text-only batch while retaining its vision
  # parameters in the model and checkpoints. Only pass image inputs when present.
  encoder_images = data.get("images") if config.use_multimodal else None
  encoder_image_masks = data.get("image_masks") if config.use_multimodal else None
  mutable_collections = ["intermediates"]
  if config.mtp_num_layers > 0 and is_train:
    # The single model.apply call now triggers the entire chain if MTP is enabled:
    # Decoder runs -> returns hidden_state -> MTPBlock uses it -> MTPBlock sows losses -> we reap them here.
    mutable_collections.append("mtp_losses")

  # During evaluation, if the acceptance rate test is enabled, we must
  # make its specific collection mutable so the MTPBlock can sow into it.
  if config.mtp_eval_target_module > 0 and not is_train:
    mutable_collections.append("mtp_acceptance")
  if config.use_indexer and is_train:
    mutable_collections.append("indexer_losses")

  sparsity_enabled = is_train and config.weight_sparsity_n and config.weight_sparsity_m
  if sparsity_enabled:
    mutable_collections.append("batch_stats")
  if isinstance(model, nn.Module):
    # inputs, targets, segments, positions = apply_args
    if dropout_rng is not None:
      rng1, aqt_rng = jax.random.split(dropout_rng)
    else:
      rng1, aqt_rng = None, None

    # Flax Linen model
    if sparsity_enabled:
      model_vars = {"params": params}
      if sparsity_state:
        model_vars["batch_stats"] = sparsity_state
    else:
      model_vars = params
    logits, intermediate_outputs = model.apply(
        model_vars,
        data["inputs"],
        data["inputs_position"],
        decoder_segment_ids=data["inputs_segmentation"],
        encoder_images=encoder_images,
        encoder_image_masks=encoder_image_masks,
        enable_dropout=config.enable_dropout if is_train else False,
        rngs={"dropout": rng1, "params": aqt_rng},  # pyrefly: ignore[bad-argument-type]
        mutable=mutable_collections,
        decoder_target_tokens=data["targets"],
        decoder_target_mask=data["targets_segmentation"],
    )

    if (config.use_indexer and not config.indexer_sparse_training) and is_train:
      # In Dense Warm-up stage, we skip main model loss calculation for efficiency.
      # The main model parameters are frozen and only the indexer is trained via KL divergence.
      xent_sum = 0.0
      total_z_loss = 0.0
    elif config.num_vocab_tiling > 1:
      hidden_state_key = ("intermediates", "decoder", "hidden_states")
      hidden_states = maxtext_utils.get_nested_value(intermediate_outputs, hidden_state_key)[0]
      xent_sum, total_z_loss = vocab_tiling_linen_loss(hidden_states, data, config, model, params, is_train)
    else:
      if is_block_diffusion:
        logits = block_diffusion_target_alignment.align_logits_to_targets(
            logits,
            config.block_diffusion_logit_alignment,
            target_positions,
            data["targets_segmentation"] != 0,
        )
      one_hot_targets = jax.nn.one_hot(data["targets"], config.vocab_size)
      xent, z_loss = max_utils.cross_entropy_with_logits(logits, one_hot_targets, z_loss=config.z_loss_multiplier)

      xent = sharding.maybe_shard_with_logical(
          xent,
          ("activation_embed_and_logits_batch", "activation_length"),
          model.mesh,
          config.shard_mode,
          debug_sharding=config.debug_sharding,
      )
      z_loss = sharding.maybe_shard_with_logical(
          z_loss,
          ("activation_embed_and_logits_batch", "activation_length"),
          model.mesh,
          config.shard_mode,
          debug_sharding=config.debug_sharding,
      )

      if is_block_diffusion:
        xent = xent * targets_loss_mask
        z_loss = z_loss * targets_loss_mask
      else:
        xent = xent * (data["targets_segmentation"] != 0)
        z_loss = z_loss * (data["targets_segmentation"] != 0)

      xent_sum = jnp.sum(xent)
      total_z_loss = jnp.sum(z_loss)
  else:
    # Flax NNX model: forward pass, then pop Intermediates sown during it.
    logits = model(
        decoder_input_tokens=data["inputs"],
        decoder_positions=data["inputs_position"],
        decoder_segment_ids=data["inputs_segmentation"],
        encoder_images=encoder_images,
        encoder_image_masks=encoder_image_masks,
        enable_dropout=config.enable_dropout if is_train else False,
        decoder_target_tokens=data["targets"],
        decoder_target_mask=data["targets_segmentation"],
    )
    # mtp_losses and mtp_acceptance subclass nnx.Intermediate, and nnx type filters match
    # subclasses. Pop them before the generic Intermediate pop below, which would otherwise
    # take them too and leave the MTP loss silently reading as 0.
    mtp_losses_state, mtp_acceptance_state = None, None
    if config.mtp_num_layers > 0:
      mtp_losses_state = nnx.pop(model, mtp_losses)
      mtp_acceptance_state = nnx.pop(model, mtp_acceptance)

    indexer_losses_state = None
    if config.use_indexer:
      # Pop dedicated indexer_losses to harvest auxiliary KL loss and prevent model state PyTree mismatches.
      indexer_losses_state = nnx.pop(model, indexer_losses)

    intermediates = nnx.pop(model, nnx.Intermediate)
    intermediate_outputs = intermediates.to_pure_dict()

    # Store them under the collection name so calculate_mtp_loss and
    # calculate_mtp_acceptance_rate find them at the same path as the Linen collections.
    if mtp_losses_state is not None and mtp_acceptance_state is not None:
      intermediate_outputs["mtp_losses"] = mtp_losses_state.to_pure_dict()
      intermediate_outputs["mtp_acceptance"] = mtp_acceptance_state.to_pure_dict()

    if indexer_losses_state is not None:
      intermediate_outputs["indexer_losses"] = indexer_losses_state.to_pure_dict()

    if (config.use_indexer and not config.indexer_sparse_training) and is_train:
      # In Dense Warm-up stage, we skip main model loss calculation for efficiency.
      # The main model parameters are frozen and only the indexer is trained via KL divergence.
      xent_sum = 0.0
      total_z_loss = 0.0
    elif config.num_vocab_tiling > 1:
      hidden_state_key = ("decoder", "hidden_states")
      hidden_states = maxtext_utils.get_nested_value(intermediate_outputs, hidden_state_key)[0]
      xent_sum, total_z_loss = vocab_tiling_nnx_loss(model, hidden_states, data, config, is_train)
    else:
      if is_block_diffusion:
        logits = block_diffusion_target_alignment.align_logits_to_targets(
            logits,
            config.block_diffusion_logit_alignment,
            target_positions,
            data["targets_segmentation"] != 0,
        )
      one_hot_targets = jax.nn.one_hot(data["targets"], config.vocab_size)
      xent, z_loss = max_utils.cross_entropy_with_logits(logits, one_hot_targets, z_loss=config.z_loss_multiplier)

      xent = sharding.maybe_shard_with_logical(
          xent,
          ("activation_embed_and_logits_batch", "activation_length"),
          model.mesh,
          config.shard_mode,
          debug_sharding=config.debug_sharding,
      )
      z_loss = sharding.maybe_shard_with_logical(
          z_loss,
          ("activation_embed_and_logits_batch", "activation_length"),
          model.mesh,
          config.shard_mode,
          debug_sharding=config.debug_sharding,
      )

      if is_block_diffusion:
        xent = xent * targets_loss_mask
        z_loss = z_loss * targets_loss_mask
      else:
        xent = xent * (data["targets_segmentation"] != 0)
        z_loss = z_loss * (data["targets_segmentation"] != 0)

      xent_sum = jnp.sum(xent)
      total_z_loss = jnp.sum(z_loss)

  if is_block_diffusion:
    assert targets_loss_mask is not None
    total_weights = jnp.sum(targets_loss_mask)
  else:
    total_weights = jnp.sum(data["targets_segmentation"] != 0)
  # If gradient accumulation is enabled, we don't need to divide xent_sum
  # by total_weights and then multiply the computed gradient by total_weights,
  # since it's equivalent to computing the gradient from xent_sum.
  # This simplification reduces the number of operations and makes it easier
  # for XLA to move all-reduce out of the gradient accumulation loop when use
  # Zero1+GA to reduce communication overhead.
  # EPS was used to avoid division by zero, but it's not needed when gradient
  # accumulation is enabled since there's no division.
  if config.gradient_accumulation_steps > 1 and not config.use_tunix_gradient_accumulation:
    loss = xent_sum
  else:
    # When using Tunix gradient accumulation, we revert to standard normalization.
    # Unlike the manual accumulation path above, Tunix (via optax.MultiSteps) expects
    # a normalized loss for each step. It handles the accumulation state
    # updates and scaling internally.
    loss = xent_sum / (total_weights + EPS)

  # We keep z-loss normalized by total_weights.
  total_z_loss = total_z_loss / (total_weights + EPS)

  # Calculate and Add MTP Loss
  mtp_loss = 0.0
  if config.mtp_num_layers > 0 and is_train:
    mtp_loss = calculate_mtp_loss(intermediate_outputs, config)
    loss += mtp_loss

  # Calculate and add auxiliary Indexer loss
  indexer_loss = 0.0
  if config.use_indexer and config.indexer_loss_scaling_factor > 0.0:
    # Recursively collect per-layer indexer losses across all scanned transformer layers.
    indexer_losses_list = maxtext_utils.collect_intermediates_by_suffix(intermediate_outputs, "indexer_loss")
    if indexer_losses_list:
      indexer_loss = jnp.mean(jnp.concatenate([jnp.atleast_1d(x) for x in indexer_losses_list]))
      loss += indexer_loss  # Injects loss into scalar objective to drive backward gradients for indexer weights.
    else:
      max_logging.debug("No Indexer loss found. Defaulting to 0.0.")

  # get MoE load balance loss
  moe_lb_loss = 0.0
  if config.num_experts > 1:
    moe_lb_losses = maxtext_utils.collect_intermediates_by_suffix(intermediate_outputs, "moe_lb_loss")
    if moe_lb_losses:
      moe_lb_loss = jnp.mean(jnp.concatenate(moe_lb_losses))
      loss += moe_lb_loss
    else:
      max_logging.debug("\nNo MoE load balance loss found. Defaulting to 0.0.")

  # get MoE routed bias term updates
  moe_bias_updates = None
  mtp_moe_bias_updates = None
  if config.routed_bias and config.routed_bias_update_rate > 0.0:
    if isinstance(model, nn.Module):
      nested_key = ("intermediates", "decoder", "moe_layers", "moe_bias_updates")
      moe_bias_updates = maxtext_utils.get_nested_value(intermediate_outputs, nested_key, None)
    else:
      # NNX intermediates are model-rooted (no "intermediates" prefix),
      # so match by suffix instead. Unlike collect_intermediates_by_suffix
      # we must not ravel: the decoder update is a 2-D matrix that's
      # transposed and MTP update is 1-D matrix.
      for path, val in jax.tree_util.tree_leaves_with_path(intermediate_outputs):
        keys = tuple(k.key for k in path if hasattr(k, "key"))
        if not keys or keys[-1] != "moe_bias_updates":
          continue
        if "decoder" in keys:
          moe_bias_updates = (val,)
        elif "mtp_block" in keys:
          if mtp_moe_bias_updates is None:
            mtp_moe_bias_updates = []
          mtp_moe_bias_updates.append(val)

  # Add the model's primary output to the intermediates dict so it can be used
  # by the acceptance rate calculation in eval_step.
  if not is_train and config.mtp_eval_target_module > 0:
    intermediate_outputs["logits"] = logits

  aux = {
      "intermediate_outputs": intermediate_outputs,
      "xent_sum": xent_sum,
      "z_loss": total_z_loss,
      "total_weights": total_weights,
      "moe_lb_loss": moe_lb_loss,
      "indexer_loss": indexer_loss,
      "moe_bias_updates": moe_bias_updates,
      "mtp_moe_bias_updates": mtp_moe_bias_updates,
      "mtp_loss": mtp_loss,
      "batch_stats": (intermediate_outputs.get("batch_stats", None) if hasattr(intermediate_outputs, "get") else None),
  }
  return loss, aux


def _find_gate_bias(module: nnx.Module | None) -> nnx.Variable | None:
  """Finds the router gate bias parameter in a module graph."""
  if module is None:
    return None
  for _, node in nnx.iter_graph(module):
    if type(node).__name__ == "GateLogit" and hasattr(node, "bias") and node.bias is not None:
      return node.bias
  return None


def train_step(model, config, state_mesh_shardings, params_shardings, state, data, dropout_rng=None):
  """Training step for both Linen and NNX models.

  Args:
    model: A nn.Module (Linen) or nnx.GraphDef of the TrainStateNNX (NNX).
    config: Hyperparameters.
    state_mesh_shardings: PyTree of PartitionSpecs for the train state.
    params_shardings: PyTree of PartitionSpecs for model parameters, used for gradient accumulation.
    state: Linen TrainState or NNX pure State.
    data: Training data batch.
    dropout_rng: A key to use to generate rng for dropout (Linen); unused for NNX.

  Returns:
    new_state: Updated Linen TrainState or NNX pure State.
    metrics: Dictionary of model metrics such as loss, training rate, etc.
  """
  # pylint: disable=too-many-nested-blocks
  # --- Per-path initialization ---
  if isinstance(model, nn.Module):
    params = state.params
    loss_model, loss_params, loss_rng = model, params, dropout_rng
  else:
    state = nnx.merge(model, state)  # reconstruct TrainStateNNX
    loss_model, loss_params, loss_rng = state.model, None, None

  # --- Gradient computation ---
  if config.gradient_accumulation_steps > 1:
    loss, aux, raw_grads = gradient_accumulation_loss_and_grad(
        loss_fn,
        config,
        loss_model,
        loss_params,
        params_shardings,
        data,
        loss_rng,
    )
  else:
    if isinstance(model, nn.Module):
      if config.shard_optimizer_over_data:
        params = jax.tree.map(
            functools.partial(sharding.maybe_shard_with_name, shard_mode=config.shard_mode),
            params,  # pyrefly: ignore[unbound-name]
            params_shardings,
        )
      sparsity_enabled = config.weight_sparsity_n and config.weight_sparsity_m
      pure_params = params["params"] if sparsity_enabled else params  # pyrefly: ignore[unbound-name]
      batch_stats = params.get("batch_stats", {})

      grad_func = jax.value_and_grad(loss_fn, argnums=4, has_aux=True)
      (loss, aux), raw_grads = grad_func(
          model,
          config,
          data,
          dropout_rng,
          pure_params,
          sparsity_state=batch_stats,
          is_train=True,
      )
    else:
      owg_type = variablelib.variable_type_from_name("_overwrite_with_gradient", allow_register=True)
      custom_param_filter = nnx.Any(owg_type)
      train_param_type = (
          getattr(nnx, "LoRAParam", nnx.Param)
          if getattr(getattr(config, "lora", None), "enable_lora", False)
          else nnx.Param
      )
      nnx.pop(state.model, nnx.Intermediate)
      model_graphdef, curr_params, custom_params, rest = nnx.split(
          state.model, train_param_type, custom_param_filter, ...
      )
      if config.parameter_memory_host_offload:
        # Params are kept on host (pinned_host) in in_shardings. Move only Param
        # variables to device before the forward/backward pass so that all dot_general
        # operands share the same memory space (XLA on GPU requires this).
        # Using params_shardings (Param-only) avoids Shardy rank mismatches that
        # occur when applying PartitionSpec() (rank-0 in SDY) to rank-1 RNG key tensors.
        device_param_shardings = jax.tree_util.tree_map_with_path(
            maxtext_utils_nnx.move_memory_to_device,
            params_shardings,
            is_leaf=lambda x: isinstance(x, NamedSharding),
        )
        curr_params = jax.device_put(curr_params, device_param_shardings)
        nnx.update(state.model, curr_params)  # ensure state.model has device params for optimizer update
      if config.shard_optimizer_over_data:
        param_sharding_lookup = {}
        for p, s in jax.tree_util.tree_leaves_with_path(
            params_shardings, is_leaf=lambda x: isinstance(x, (nnx.Variable, NamedSharding, jax.sharding.Sharding))
        ):
          param_sharding_lookup[p] = s.get_value() if isinstance(s, nnx.Variable) else s

        def _maybe_shard_param(path, var):
          if path in param_sharding_lookup:
            return sharding.maybe_shard_with_name(var, param_sharding_lookup[path], shard_mode=config.shard_mode)
          return var

        curr_params = jax.tree_util.tree_map_with_path(
            _maybe_shard_param,
            curr_params,
            is_leaf=lambda x: isinstance(x, nnx.Variable),
        )
        nnx.update(state.model, curr_params)

      def diff_wrapper(curr_params, custom_params, rest, config, data):
        local_model = nnx.merge(model_graphdef, curr_params, custom_params, rest, copy=True)
        loss, aux = loss_fn(local_model, config, data, None, None, is_train=True)
        non_param_rest = nnx.state(local_model, nnx.Not(nnx.Any(nnx.Param, nnx.Intermediate)))
        return loss, (aux, non_param_rest)

      grad_func = jax.value_and_grad(diff_wrapper, argnums=(0, 1), has_aux=True)
      (loss, (aux, non_param_rest)), (raw_grads, custom_grads) = grad_func(curr_params, custom_params, rest, config, data)
      nnx.update(state.model, nnx.State.merge(custom_grads, non_param_rest))

  raw_grads = jax.tree_util.tree_map(
      lambda x: x.astype(config.grad_dtype) if x.dtype == jnp.float32 else x,
      raw_grads,
  )
  if config.parameter_memory_host_offload:
    raw_grads = jax.device_put(
        raw_grads,
        max_utils.with_memory_kind(params_shardings, "device"),
    )

  # Extract aux fields into locals
  intermediate_outputs = aux["intermediate_outputs"]
  xent_sum = aux["xent_sum"]
  total_weights = aux["total_weights"]
  moe_lb_loss = aux["moe_lb_loss"]
  indexer_loss = aux.get("indexer_loss", 0.0)
  z_loss = aux.get("z_loss", 0.0)
  moe_bias_updates = aux.get("moe_bias_updates")
  mtp_moe_bias_updates = aux.get("mtp_moe_bias_updates")
  mtp_loss = aux.get("mtp_loss", 0.0)
  new_opt_state = None
  bias_metrics = {}

  if isinstance(model, nn.Module):
    if config.gradient_clipping_threshold > 0:
      grads = maxtext_utils.apply_gradient_clipping(raw_grads, state, config.gradient_clipping_threshold)
    else:
      grads = raw_grads
    if config.optimizer_memory_host_offload:
      state = state.replace(
          opt_state=jax.device_put(
              state.opt_state,
              jax.tree_util.tree_map(
                  lambda x: x.with_memory_kind(kind="device"),
                  state_mesh_shardings.opt_state,
              ),
          )
      )
    # Move all parameters to device before optimizer update
    if config.parameter_memory_host_offload:
      max_logging.log("\nMoving all parameters to device before optimizer update")

      def move(path, value):
        max_logging.log(f"train.py: Moving f{path} to device")
        return value.with_memory_kind(kind="device")

      state = state.replace(
          params=jax.device_put(
              state.params,
              jax.tree_util.tree_map_with_path(move, state_mesh_shardings.params),
          )
      )
    # Re-wrap grads to match state.params structure if it's a dict of collections
    # (when weight_sparsity is enabled, params has both 'params' and 'batch_stats' keys).
    sparsity_enabled = config.weight_sparsity_n and config.weight_sparsity_m
    if sparsity_enabled:
      full_grads = {"params": grads}
      if "batch_stats" in state.params:
        batch_stats_grads = jax.tree_util.tree_map(jnp.zeros_like, state.params.get("batch_stats", {}))
        full_grads["batch_stats"] = batch_stats_grads
      full_grads = max_utils.unbox_logicallypartioned(full_grads)
    else:
      full_grads = grads

    if getattr(config, "skip_step_on_spikes", False):
      grad_norm = max_utils.l2norm_pytree(grads)
      # TrainState.apply_gradients doesn't pass **kwargs to tx.update, so we unpack it manually.
      updates, new_opt_state = state.tx.update(grads, state.opt_state, state.params, loss=loss, grad_norm=grad_norm)
      new_params = optax.apply_updates(state.params, updates)

      new_state = state.replace(
          step=state.step + 1,
          params=new_params,
          opt_state=new_opt_state,
      )
    else:
      new_state = state.apply_gradients(grads=full_grads)

    # Apply updates for Auxiliary-Loss-Free load balancing for DeepSeek family
    if config.routed_bias and config.routed_bias_update_rate > 0.0 and moe_bias_updates is not None:
      target_path = ("params", "decoder", "moe_layers", "DeepSeekMoeBlock_0", "MoeBlock_0", "gate", "bias")
      # Updates the shape to be aligned with state.
      moe_bias_updates = jnp.array(moe_bias_updates[0]).transpose()
      new_state = maxtext_utils.update_state_param(new_state, target_path, moe_bias_updates)
  else:
    if config.gradient_clipping_threshold > 0:
      grads = maxtext_utils.apply_gradient_clipping(raw_grads, None, config.gradient_clipping_threshold)
    else:
      grads = raw_grads
    if config.optimizer_memory_host_offload:
      # state.optimizer is an NNX Optimizer module; state_mesh_shardings.optimizer
      # is an NNX State. Use nnx.state() to get a compatible State for device_put.
      device_opt_shardings = jax.tree_util.tree_map_with_path(
          maxtext_utils_nnx.move_memory_to_device,
          state_mesh_shardings.optimizer,
          is_leaf=lambda x: isinstance(x, NamedSharding),
      )
      opt_state = nnx.state(state.optimizer)
      new_opt_state = jax.device_put(opt_state, device_opt_shardings)
      nnx.update(state.optimizer, new_opt_state)
    if config.skip_step_on_spikes:
      # The skip-step optimizer is a GradientTransformationExtraArgs that reads
      # loss/grad_norm to decide whether to zero the update on a spike. nnx
      # Optimizer.update forwards these kwargs to tx.update.
      grad_norm = max_utils.l2norm_pytree(grads)
      state.apply_gradients(grads, loss=loss, grad_norm=grad_norm)
    else:
      state.apply_gradients(grads)
    new_state = state

    # Apply updates for Auxiliary-Loss-Free load balancing for DeepSeek family
    # pylint: disable=too-many-nested-blocks
    if config.routed_bias and config.routed_bias_update_rate > 0.0:
      if getattr(config, "model_name", "").startswith("deepseek4"):
        max_logging.log("DeepSeek V4: Applying auxiliary-loss-free routing bias via pure NNX MoEBiasVar.")
        flat_intermediates = traverse_util.flatten_dict(aux.get("intermediate_outputs", {}))
        for path, update in flat_intermediates.items():
          if path[-1] != "moe_bias_updates":
            continue
          target = new_state.model
          prefix = path[1:-1] if path[0] == "intermediates" else path[:-1]
          for key in prefix:
            if hasattr(target, key):
              target = getattr(target, key)
            elif isinstance(target, dict) and key in target:
              target = target[key]
            else:
              target = None
              break
          if target is None:
            continue
          for _, node in nnx.iter_graph(target):
            if type(node).__name__ == "GateLogit" and hasattr(node, "bias") and node.bias is not None:
              update_val = update[0] if isinstance(update, (tuple, list)) else update
              name_prefix = "-".join(map(str, prefix))
              if getattr(config, "log_moe_bias_norms", False):
                bias_metrics[f"learning/moe_bias_before_norm_{name_prefix}"] = jnp.linalg.norm(node.bias.value)
              node.bias.value = node.bias.value + jnp.array(update_val)
              if getattr(config, "log_moe_bias_norms", False):
                bias_metrics[f"learning/moe_bias_update_norm_{name_prefix}"] = jnp.linalg.norm(jnp.array(update_val))
      else:
        # 1. Update main decoder scanned MoE layers.
        # The update from the scan is (num_moe_layers, num_experts) and must be transposed.
        decoder_layer = getattr(new_state.model.decoder, "moe_layers", new_state.model.decoder)
        decoder_bias = _find_gate_bias(decoder_layer)
        if decoder_bias is not None:
          decoder_bias.value = decoder_bias.value + jnp.array(moe_bias_updates[0]).transpose()

        # 2. Update auxiliary MTP MoE layers (if enabled).
        # Unlike the main decoder, each MTP layer is an individual un-scanned layer
        # with a 1D bias of shape (num_experts,).
        if mtp_moe_bias_updates is not None and hasattr(new_state.model, "mtp_block"):
          for i, update in enumerate(mtp_moe_bias_updates):
            mtp_layer = getattr(new_state.model.mtp_block, f"mtp_layer_{i + 1}", None)
            mtp_bias = _find_gate_bias(mtp_layer)
            if mtp_bias is not None:
              mtp_bias.value = mtp_bias.value + jnp.array(update)

  lm_loss = xent_sum / (total_weights + EPS)
  scalar_metrics = {
      "learning/loss": loss,
      "learning/lm_loss": lm_loss,
      "learning/perplexity": jnp.exp(lm_loss),
      "learning/z_loss": z_loss,
      "learning/moe_lb_loss": moe_lb_loss,
      "learning/indexer_loss": indexer_loss,
      "learning/mtp_loss": mtp_loss,
      "learning/total_weights": total_weights,
  }
  scalar_metrics.update(bias_metrics)
  if config.use_qk_clip:
    if isinstance(model, nn.Module):
      new_state = qk_clip_utils.apply_qk_clip(new_state, intermediate_outputs, config)
    else:
      new_state = qk_clip_utils.apply_qk_clip_nnx(new_state, intermediate_outputs, config)

    global_max_logit = qk_clip_utils.calculate_max_logit_metric(intermediate_outputs)
    if global_max_logit is not None:
      scalar_metrics["learning/max_logits"] = global_max_logit

  if not config.optimizer_memory_host_offload:
    scalar_metrics["learning/grad_norm"] = max_utils.l2norm_pytree(grads)
    scalar_metrics["learning/raw_grad_norm"] = max_utils.l2norm_pytree(raw_grads)
    if isinstance(model, nn.Module):
      scalar_metrics["learning/param_norm"] = max_utils.l2norm_pytree(new_state.params)
    else:
      model_params = nnx.state(new_state.model, nnx.Param)
      scalar_metrics["learning/param_norm"] = max_utils.l2norm_pytree(model_params)

  # Surface skip-step rejections as a TB metric. The skip-step optimizer stores
  # is_skipped in its opt_state: the Linen path gets it from the tx.update return,
  # the NNX path reads it back off the optimizer it just updated in place.
  if config.skip_step_on_spikes:
    if isinstance(model, nn.Module):
      is_skipped = new_opt_state.get("is_skipped") if isinstance(new_opt_state, dict) else None
    else:
      opt_state = nnx.to_pure_dict(nnx.state(new_state.optimizer)).get("opt_state", {})
      is_skipped = opt_state.get("is_skipped") if isinstance(opt_state, dict) else None
    if is_skipped is not None:
      scalar_metrics["optim/step_skipped"] = is_skipped.astype(jnp.float32)
  metrics = {
      "scalar": scalar_metrics,
      "scalars": {},
  }
  if getattr(config, "record_internal_nn_metrics", False):
    record_activation_metrics(metrics, intermediate_outputs, config)

  if isinstance(model, nn.Module):
    return new_state, metrics
  # Drop Intermediates (e.g. sowed max_logits for QK-Clip) and the MTP sown
  # vars (mtp_losses/mtp_acceptance) before returning. They're absent from
  # state_mesh_shardings and would cause a leaf-count / structure mismatch.
  return nnx.state(new_state, nnx.Not(nnx.Intermediate)), metrics


def eval_step(model, config, state, data, dropout_rng=None):
  """eval_step no backprop and new state compared with train_step."""
  if isinstance(model, nn.Module):
    sparsity_enabled = config.weight_sparsity_n and config.weight_sparsity_m
    pure_params = state.params["params"] if sparsity_enabled else state.params
    batch_stats = state.params.get("batch_stats", {})

    eval_loss_fn = functools.partial(loss_fn, model, config, data, dropout_rng, is_train=False)
    loss, aux = eval_loss_fn(pure_params, sparsity_state=batch_stats)
  else:
    state = nnx.merge(model, state)  # reconstruct TrainStateNNX
    loss, aux = loss_fn(state.model, config, data, None, None, is_train=False)

  mtp_acceptance_rate = 0.0
  if config.mtp_eval_target_module > 0:
    mtp_acceptance_rate = calculate_mtp_acceptance_rate(aux["intermediate_outputs"], config)

  xent_sum = aux["xent_sum"]
  z_loss = aux.get("z_loss", 0.0)
  total_weights = aux["total_weights"]
  moe_lb_loss = aux["moe_lb_loss"]
  indexer_loss = aux.get("indexer_loss", 0.0)
  mtp_loss = aux.get("mtp_loss", 0.0)
  eval_total_loss = xent_sum
  metrics = {
      "scalar": {
          "evaluation/loss": loss,
          "evaluation/z_loss": z_loss,
          "evaluation/total_loss": eval_total_loss,
          "evaluation/total_weights": total_weights,
          "evaluation/moe_lb_loss": moe_lb_loss,
          "evaluation/indexer_loss": indexer_loss,
          "evaluation/mtp_loss": mtp_loss,
          "evaluation/mtp_acceptance_rate_percent": mtp_acceptance_rate,
      },
  }

  return metrics


def training_loop_iteration(
    jax_device_state: dict[str, Any],
    python_vars: dict[str, Any],
    immutable_data: dict[str, Any],
):
  """Executes a single iteration of the training loop."""
  # Unpack jax_device_state
  state = jax_device_state["state"]
  init_rng = jax_device_state["init_rng"]
  mesh = jax_device_state["mesh"]
  state_mesh_shardings = jax_device_state["state_mesh_shardings"]
  p_train_step = jax_device_state["p_train_step"]
  p_eval_step = jax_device_state["p_eval_step"]
  model = jax_device_state["model"]

  # Unpack python_vars
  step = python_vars["step"]
  last_step_completion = python_vars["last_step_completion"]
  data_loader = python_vars["data_loader"]
  rampup_manager = python_vars["rampup_manager"]
  recorder = python_vars["recorder"]
  checkpoint_manager = python_vars["checkpoint_manager"]
  data_iterator = python_vars["data_iterator"]
  eval_data_iterator = python_vars["eval_data_iterator"]
  metric_logger_instance = python_vars["metric_logger_instance"]
  prof = python_vars["prof"]

  # Unpack immutable_data
  config = immutable_data["config"]  # for helpers
  logical_axis_rules_for_train = immutable_data["logical_axis_rules_for_train"]
  logical_axis_rules_for_eval = immutable_data["logical_axis_rules_for_eval"]
  shard_optimizer_over_data = immutable_data["shard_optimizer_over_data"]
  shard_mode = immutable_data["shard_mode"]
  eval_interval = immutable_data["eval_interval"]
  eval_steps = immutable_data["eval_steps"]
  start_step = immutable_data["start_step"]
  eval_start_step = immutable_data["eval_start_step"]

  # HLO dump config
  dump_hlo = immutable_data["dump_hlo"]
  dump_step = immutable_data["dump_step"]
  dump_hlo_local_dir = immutable_data["dump_hlo_local_dir"]
  dump_hlo_gcs_dir = immutable_data["dump_hlo_gcs_dir"]
  dump_hlo_module_name = immutable_data["dump_hlo_module_name"]
  dump_hlo_delete_local_after = immutable_data["dump_hlo_delete_local_after"]
  dump_hlo_upload_all = immutable_data["dump_hlo_upload_all"]

  prof.maybe_activate_profiler(step, state)
  if config.elastic_enabled:
    elastic_utils.maybe_elastic_scale_up(config, checkpoint_manager)

  with jax.profiler.StepTraceAnnotation("train", step_num=step):
    example_batch = data_loader.load_next_batch(rampup_manager=rampup_manager)
    # DiLoCo's inner step takes the rng like the Linen step does.
    if isinstance(model, nn.Module) or config.enable_diloco:
      # pylint: disable=not-callable
      step_rng_args = (jax.jit(jax.random.fold_in)(init_rng, step),)
    else:
      step_rng_args = ()
    with maybe_record_goodput(recorder, GoodputEvent.STEP, step):
      with jax.set_mesh(mesh), nn_partitioning.axis_rules(logical_axis_rules_for_train):
        if shard_optimizer_over_data and isinstance(model, nn.Module):
          state = sharding.maybe_shard_with_name(state, state_mesh_shardings, shard_mode)
        state, metrics = p_train_step(state, example_batch, *step_rng_args)

  step_time_delta = datetime.datetime.now() - last_step_completion
  last_step_completion = datetime.datetime.now()

  checkpointing.maybe_save_checkpoint(checkpoint_manager, state, config, data_iterator, step)

  if dump_hlo and step == (dump_step if dump_step >= 0 else start_step):
    jax.block_until_ready(state)  # Ensure compilation has finished.
    gcs_utils.upload_dump(
        dump_hlo_local_dir,
        dump_hlo_gcs_dir,
        module_name=dump_hlo_module_name,
        delete_local_after=dump_hlo_delete_local_after,
        all_host_upload=dump_hlo_upload_all,
    )

  if (
      eval_interval > 0
      and step >= start_step
      and step >= eval_start_step
      and (step - eval_start_step) % eval_interval == 0
  ):
    assert eval_data_iterator
    # Explicitly reset the eval iterator and counters before starting the eval loop
    eval_data_iterator.reset()
    metric_logger_instance.reset_eval_metrics()
    max_logging.log(f"Starting eval after train step {step}")

    eval_step_count = 0
    last_eval_step_completion = datetime.datetime.now()
    # pylint: disable=not-callable
    for eval_batch in eval_data_iterator:
      # Shard input eval data
      eval_batch = jax.device_put(
          eval_batch, sharding.get_input_data_sharding(config, mesh, rules=config.logical_axis_rules_for_eval)
      )
      if 0 < eval_steps <= eval_step_count:
        break
      with jax.set_mesh(mesh), nn_partitioning.axis_rules(logical_axis_rules_for_eval):
        eval_metrics = p_eval_step(state, eval_batch, *step_rng_args)
      eval_step_time_delta = datetime.datetime.now() - last_eval_step_completion
      last_eval_step_completion = datetime.datetime.now()
      metric_logger_instance.buffer_and_write_metrics(
          eval_metrics, eval_step_count, step_time_delta=eval_step_time_delta, is_training=False
      )
      eval_step_count += 1

  prof.maybe_deactivate_profiler(step, state)

  if step == start_step:
    max_utils.print_mem_stats("After params initialized")

  metric_logger_instance.buffer_and_write_metrics(metrics, step, step_time_delta)

  # Pack mutated state back to dicts
  jax_device_state["state"] = state
  python_vars["last_step_completion"] = last_step_completion


def train_loop(config, recorder, state=None):
  """Main Training loop."""
  (
      init_rng,
      checkpoint_manager,
      state_mesh_shardings,
      model,
      mesh,
      learning_rate_schedule,
      data_iterator,
      data_loader,
      rampup_manager,
      eval_data_iterator,
      state,
  ) = train_utils.setup_train_loop(config, recorder)

  # Throttling is applied only if configured (dcn_bandwidth_limit is set).
  # The default flag value is empty, meaning no throttling is applied by default.
  train_utils.maybe_apply_dcn_throttling(config)

  start_step = get_first_step(model, state)  # this is the start_step for training
  train_utils.validate_completed_steps(start_step, config.steps)

  if isinstance(model, nn.Module):
    jit_model = model
  elif config.enable_diloco:
    # state is the DiLoCoTrainState; `model` is already the TrainStateNNX graphdef the inner step needs.
    jit_model = model
  else:
    jit_model, state = nnx.split(state)

  if config.pure_nnx and config.enable_diloco:
    # DiLoCoTrainState.params already holds the param shardings the inner step needs;
    # the Zero-1 opt overlay doesn't apply through the diloco wrapper.
    params_shardings = state_mesh_shardings.params
  else:
    params_shardings, state_mesh_shardings = sharding.maybe_update_params_sharding_with_opt(config, state_mesh_shardings)

  p_train_step, p_eval_step = train_utils.jit_train_and_eval_step(
      config,
      jit_model,
      mesh,
      state,
      state_mesh_shardings,
      train_step,
      eval_step,
      eval_data_iterator,
      params_shardings,
  )

  with jax.set_mesh(mesh), mesh, nn_partitioning.axis_rules(config.logical_axis_rules):
    data_sharding = sharding.get_input_data_sharding(config, mesh)
    shaped_batch = maxtext_utils.get_shaped_batch(config, batch_sharding=data_sharding)
    if config.shard_optimizer_over_data and isinstance(model, nn.Module):
      state = sharding.maybe_shard_with_name(state, state_mesh_shardings, config.shard_mode)
    elif config.shard_optimizer_over_data:
      # NNX: reshard state so params match the data-sharded in_shardings (Zero-1 layout)
      state = jax.device_put(state, state_mesh_shardings)
    if isinstance(model, nn.Module) or config.enable_diloco:
      # The DiLoCo train step takes (state, batch, rng), like the Linen step.
      lower_args = (state, shaped_batch, init_rng)
    else:
      lower_args = (state, shaped_batch)
    maxtext_utils.maybe_dump_jaxpr(config, p_train_step, lower_args)
    if config.compiled_trainstep_file == "":  # compile only when there is no pre-compiled file loaded
      compiler_options = max_utils.parse_libtpu_flags_to_dict(config.compile_xla_flags)
      compiled = p_train_step.lower(*lower_args).compile(compiler_options=compiler_options)
      compiled_stats = compiled.memory_analysis()
      max_utils.print_compiled_memory_stats(compiled_stats)
  prof = profiler.Profiler(config, offset_step=start_step)
  metric_logger_instance = metric_logger.MetricLogger(config=config, learning_rate_schedule=learning_rate_schedule)

  # Write train config params, num model params, and XLA flags to tensorboard
  if isinstance(model, nn.Module):
    setup_params = state.params
  elif config.enable_diloco:
    setup_params = state.params  # DiLoCoTrainState.params: the outer (global) params
  else:
    _, setup_params, _ = nnx.split(state.model, nnx.Param, ...)
  metric_logger_instance.write_setup_info_to_tensorboard(setup_params)

  elastic_utils.record_elastic_reinit_end()

  # Initialize dictionaries for refactored iteration
  jax_device_state = {
      "state": state,
      "init_rng": init_rng,
      "mesh": mesh,
      "state_mesh_shardings": state_mesh_shardings,
      "p_train_step": p_train_step,
      "p_eval_step": p_eval_step,
      "model": model,
  }

  python_vars = {
      "step": start_step,
      "last_step_completion": datetime.datetime.now(),
      "data_loader": data_loader,
      "rampup_manager": rampup_manager,
      "recorder": recorder,
      "checkpoint_manager": checkpoint_manager,
      "data_iterator": data_iterator,
      "eval_data_iterator": eval_data_iterator,
      "metric_logger_instance": metric_logger_instance,
      "prof": prof,
  }

  immutable_data = {
      "config": config,
      "logical_axis_rules_for_train": config.logical_axis_rules,
      "logical_axis_rules_for_eval": config.logical_axis_rules_for_eval,
      "shard_optimizer_over_data": config.shard_optimizer_over_data,
      "shard_mode": config.shard_mode,
      "steps": config.steps,
      "eval_interval": config.eval_interval,
      "eval_steps": config.eval_steps,
      "eval_start_step": config.eval_start_step,
      "save_checkpoint_on_completion": config.save_checkpoint_on_completion,
      "start_step": start_step,
      "dump_hlo": config.dump_hlo,
      "dump_step": config.dump_step,
      "dump_hlo_local_dir": config.dump_hlo_local_dir,
      "dump_hlo_gcs_dir": config.dump_hlo_gcs_dir,
      "dump_hlo_module_name": config.dump_hlo_module_name,
      "dump_hlo_delete_local_after": config.dump_hlo_delete_local_after,
      "dump_hlo_upload_all": config.dump_hlo_upload_all,
  }

  _job_completed_gracefully = False
  try:
    python_vars["last_step_completion"] = datetime.datetime.now()

    # Using while loop to allow for potential dynamic 'steps' adjustment in future
    while python_vars["step"] < immutable_data["steps"]:
      training_loop_iteration(jax_device_state, python_vars, immutable_data)
      python_vars["step"] += 1

    # Unpack state for post-loop actions
    state = jax_device_state["state"]

    if immutable_data["save_checkpoint_on_completion"]:
      checkpointing.maybe_save_checkpoint(checkpoint_manager, state, config, data_iterator)

    if checkpoint_manager is not None:
      # in case the last checkpoint_period checkpoint is still in progress
      checkpointing.wait_until_finished(checkpoint_manager)
    _job_completed_gracefully = True
  except exceptions.StopTraining as e:
    prof.deactivate()
    max_logging.log(f"Training stopped: {str(e)}")
    _job_completed_gracefully = True
  finally:
    if _job_completed_gracefully:
      record_goodput(recorder, RECORD_JOB_END_TIME)
    metric_logger_instance.flush_metrics_and_cleanup()
    train_utils.maybe_cleanup_dcn_throttling(config)

  return state


def initialize(argv: Sequence[str]) -> tuple[pyconfig.HyperParameters, Any]:
  """Initialization of hyperparameters and utilities"""
  pathwaysutils.initialize()
  jax.config.update("jax_default_prng_impl", "unsafe_rbg")
  if _TF_AVAILABLE:
    # TF allocates extraneous GPU memory when using TFDS data
    # this leads to CUDA OOMs. WAR for now is to hide GPUs from TF
    tf.config.set_visible_devices([], "GPU")
  if "xla_tpu_spmd_rng_bit_generator_unsafe" not in os.environ.get("LIBTPU_INIT_ARGS", ""):
    os.environ["LIBTPU_INIT_ARGS"] = (
        os.environ.get("LIBTPU_INIT_ARGS", "") + " --xla_tpu_spmd_rng_bit_generator_unsafe=true"
    )
  # TODO: mazumdera@ : ensure missing mandatory fields in base.yml are filled in in argv,
  # or fill in here
  config = pyconfig.initialize(argv)
  max_utils.print_system_information()
  train_utils.validate_train_config(config)
  jax.config.update("jax_use_shardy_partitioner", config.shardy)
  jax.config.update("jax_remove_size_one_mesh_axis_from_type", config.remove_size_one_mesh_axis_from_type)
  os.environ["TFDS_DATA_DIR"] = config.dataset_path or ""
  vertex_tensorboard_manager = VertexTensorboardManager()
  if config.use_vertex_tensorboard or os.environ.get("UPLOAD_DATA_TO_TENSORBOARD"):
    vertex_tensorboard_manager.configure_vertex_tensorboard(config)

  if config.te_comm_gemm_overlap != TeCommGemmOverlapPolicy.DISABLED:
    max_utils.bootstrap_transformer_engine_cgemm(config)

  # Create the Goodput recorder
  recorder = create_goodput_recorder(config)

  return config, recorder


def run(config, recorder):
  """Run the job given hyperparameters and utilities."""
  with (max_utils.maybe_get_transformer_engine_context(config),):
    train_loop(config, recorder)


def get_train_func(config, recorder, argv):
  """Returns the train function, wrapping in elastic_retry if elastic training is enabled."""
  if config.elastic_enabled:
    max_logging.log("Elastic utils: Elastic training enabled.")

    def on_elastic_event():
      elastic_utils.record_elastic_event_start(recorder, config)

    def on_slices_ready():
      elastic_utils.record_elastic_wait_end_and_reinit_start(recorder)

    def elastic_train_wrapper(argv: Sequence[str]) -> None:
      """Wrapper for elastic training initializes variables and runs the train loop."""
      elastic_config, elastic_recorder = initialize(argv)
      run(
          elastic_config,
          elastic_recorder,
      )

    train_func = elastic_utils.elastic_retry(
        config,
        callback_fn=on_elastic_event,
        pre_callback_fn=on_slices_ready,
    )(functools.partial(elastic_train_wrapper, argv=argv))
  else:
    # Use the already initialized variables
    def train_func():
      run(config, recorder)

  return train_func


def main(argv: Sequence[str]) -> None:
  config, recorder = initialize(argv)
  record_goodput(recorder, RECORD_JOB_START_TIME)
  train_func = get_train_func(config, recorder, argv)
  with maybe_monitor_goodput(config):
    train_func()


if __name__ == "__main__":
  app.run(main)
