# Copyright 2026 The Brax Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""Network definitions."""

import dataclasses
import functools
from typing import Any, Callable, Literal, Mapping, Sequence, Tuple
import warnings

from brax.training import types
from brax.training.acme import running_statistics
from brax.training.spectral_norm import SNDense
from flax import linen
from flax import linen as nn
import jax
import jax.numpy as jnp


ActivationFn = Callable[[jnp.ndarray], jnp.ndarray]
Initializer = Callable[..., Any]


ACTIVATION = {
    'celu': nn.activation.celu,
    'compact': nn.activation.compact,
    'elu': nn.activation.elu,
    'gelu': nn.activation.gelu,
    'glu': nn.activation.glu,
    'hard_sigmoid': nn.activation.hard_sigmoid,
    'hard_silu': nn.activation.hard_silu,
    'hard_swish': nn.activation.hard_swish,
    'hard_tanh': nn.activation.hard_tanh,
    'leaky_relu': nn.activation.leaky_relu,
    'linear': lambda x: x,
    'log_sigmoid': nn.activation.log_sigmoid,
    'log_softmax': nn.activation.log_softmax,
    'logsumexp': nn.activation.logsumexp,
    'mish': jax.nn.mish,
    'normalize': nn.activation.normalize,
    'one_hot': nn.activation.one_hot,
    'relu': nn.activation.relu,
    'relu6': nn.activation.relu6,
    'selu': nn.activation.selu,
    'sigmoid': nn.activation.sigmoid,
    'silu': nn.activation.silu,
    'soft_sign': nn.activation.soft_sign,
    'softmax': nn.activation.softmax,
    'softplus': nn.activation.softplus,
    'standardize': nn.activation.standardize,
    'swish': nn.activation.swish,
    'tanh': nn.activation.tanh,
}
KERNEL_INITIALIZER = {
    'constant': jax.nn.initializers.constant,
    'delta_orthogonal': jax.nn.initializers.delta_orthogonal,
    'glorot_normal': jax.nn.initializers.glorot_normal,
    'glorot_uniform': jax.nn.initializers.glorot_uniform,
    'he_normal': jax.nn.initializers.he_normal,
    'he_uniform': jax.nn.initializers.he_uniform,
    'kaiming_normal': jax.nn.initializers.kaiming_normal,
    'kaiming_uniform': jax.nn.initializers.kaiming_uniform,
    'lecun_normal': jax.nn.initializers.lecun_normal,
    'lecun_uniform': jax.nn.initializers.lecun_uniform,
    'normal': jax.nn.initializers.normal,
    'ones': jax.nn.initializers.ones,
    'orthogonal': jax.nn.initializers.orthogonal,
    'truncated_normal': jax.nn.initializers.truncated_normal,
    'uniform': jax.nn.initializers.uniform,
    'variance_scaling': jax.nn.initializers.variance_scaling,
    'xavier_normal': jax.nn.initializers.xavier_normal,
    'xavier_uniform': jax.nn.initializers.xavier_uniform,
    'zeros': jax.nn.initializers.zeros,
}


@dataclasses.dataclass
class FeedForwardNetwork:
  init: Callable[..., Any]
  apply: Callable[..., Any]


class MLPHead(linen.Module):
  """MLP over pre-processed latent vectors.

  For an example usage, see the Aloha sim2real code on
  https://github.com/google-deepmind/mujoco_playground.
  """

  layer_sizes: Sequence[int]
  activation: ActivationFn = linen.relu
  kernel_init: Initializer = jax.nn.initializers.lecun_uniform()
  activate_final: bool = False
  bias: bool = True
  layer_norm: bool = False
  state_key: str = 'proprio'
  latent_key_prefix: str = 'latent_'  # Assume followed by integer index.
  latent_head_size: int = 64

  @linen.compact
  def __call__(self, data: Mapping[str, jax.Array]):
    latents = []
    latent_keys = sorted(
        [k for k in data.keys() if k.startswith(self.latent_key_prefix)],
        key=lambda x: int(x.split('_')[-1]),
    )
    assert len(latent_keys) > 0, 'No latent keys found'
    for key in latent_keys:
      latents.append(data[key])
    hidden = [
        self.activation(linen.Dense(self.latent_head_size)(latent))
        for latent in latents
    ]
    if self.state_key:
      hidden.append(data[self.state_key])
    hidden = jnp.concatenate(hidden, axis=-1)
    return MLP(
        layer_sizes=self.layer_sizes,
        activation=self.activation,
        kernel_init=self.kernel_init,
        activate_final=self.activate_final,
        layer_norm=self.layer_norm,
    )(hidden)


class MLP(linen.Module):
  """MLP module."""

  layer_sizes: Sequence[int]
  activation: ActivationFn = linen.relu
  kernel_init: Initializer = jax.nn.initializers.lecun_uniform()
  output_kernel_init: Initializer | None = None
  activate_final: bool = False
  bias: bool = True
  layer_norm: bool = False

  @linen.compact
  def __call__(self, data: jnp.ndarray):
    hidden = data
    for i, hidden_size in enumerate(self.layer_sizes):
      is_last = i == len(self.layer_sizes) - 1
      ki = (self.output_kernel_init if is_last and self.output_kernel_init
            else self.kernel_init)
      hidden = linen.Dense(
          hidden_size,
          name=f'hidden_{i}',
          kernel_init=ki,
          use_bias=self.bias,
      )(hidden)
      if not is_last or self.activate_final:
        hidden = self.activation(hidden)
        if self.layer_norm:
          hidden = linen.LayerNorm()(hidden)
    return hidden


class SNMLP(linen.Module):
  """MLP module with Spectral Normalization."""

  layer_sizes: Sequence[int]
  activation: ActivationFn = linen.relu
  kernel_init: Initializer = jax.nn.initializers.lecun_uniform()
  activate_final: bool = False
  bias: bool = True

  @linen.compact
  def __call__(self, data: jnp.ndarray):
    hidden = data
    for i, hidden_size in enumerate(self.layer_sizes):
      hidden = SNDense(
          hidden_size,
          name=f'hidden_{i}',
          kernel_init=self.kernel_init,
          use_bias=self.bias,
      )(hidden)
      if i != len(self.layer_sizes) - 1 or self.activate_final:
        hidden = self.activation(hidden)
    return hidden


class CNN(linen.Module):
  """CNN module. Inputs are expected in Batch * HWC format."""

  num_filters: Sequence[int]
  kernel_sizes: Sequence[Tuple[int, ...]]
  strides: Sequence[Tuple[int, ...]]
  activation: ActivationFn = linen.relu
  use_bias: bool = True
  padding: str = 'SAME'
  max_pool: bool = False
  kernel_init: Initializer = jax.nn.initializers.lecun_normal()

  @linen.compact
  def __call__(self, data: jnp.ndarray):
    hidden = data
    for i, (num_filter, kernel_size, stride) in enumerate(
        zip(self.num_filters, self.kernel_sizes, self.strides)
    ):
      hidden = linen.Conv(
          num_filter,
          kernel_size=kernel_size,
          strides=stride,
          use_bias=self.use_bias,
          padding=self.padding,
          kernel_init=self.kernel_init,
      )(hidden)
      hidden = self.activation(hidden)
      if self.max_pool:
        hidden = linen.max_pool(
            hidden, window_shape=(2, 2), strides=(2, 2), padding='SAME'
        )
    return hidden


def _spatial_softmax(feature_map: jnp.ndarray) -> jnp.ndarray:
  h, w, c = feature_map.shape[-3], feature_map.shape[-2], feature_map.shape[-1]
  pos_x, pos_y = jnp.meshgrid(
      jnp.linspace(-1.0, 1.0, h), jnp.linspace(-1.0, 1.0, w),
      indexing='ij',
  )
  flat = feature_map.reshape(feature_map.shape[:-3] + (h * w, c))
  softmax_attention = jax.nn.softmax(flat, axis=-2)
  expected_x = jnp.sum(
      softmax_attention * pos_x.reshape(-1)[..., None], axis=-2)
  expected_y = jnp.sum(
      softmax_attention * pos_y.reshape(-1)[..., None], axis=-2)
  return jnp.concatenate([expected_x, expected_y], axis=-1)


class VisionMLP(linen.Module):
  """Applies a configurable CNN backbone then an MLP."""

  layer_sizes: Sequence[int]
  activation: ActivationFn = linen.relu
  kernel_init: Initializer = jax.nn.initializers.lecun_uniform()
  output_kernel_init: Initializer | None = None
  activate_final: bool = False
  layer_norm: bool = False
  normalise_channels: bool = False
  state_obs_key: str = ''
  policy_head: bool = True  # = False is useful for frozen encoders.
  # CNN backbone configuration. Defaults match the original NatureCNN.
  cnn_output_channels: Sequence[int] = (32, 64, 64)
  cnn_kernel_size: Sequence[int] = (8, 4, 3)
  cnn_stride: Sequence[int] = (4, 2, 1)
  cnn_padding: str = 'SAME'
  cnn_activation: ActivationFn = linen.relu
  cnn_use_bias: bool = True
  cnn_max_pool: bool = False
  cnn_global_pool: str = 'avg'
  cnn_kernel_init: Initializer = jax.nn.initializers.lecun_normal()

  @linen.compact
  def __call__(self, data: dict):
    pixels_hidden = {k: v for k, v in data.items() if k.startswith('pixels/')}
    if self.normalise_channels:
      # Calculates shared statistics over an entire 2D image.
      image_layernorm = functools.partial(
          linen.LayerNorm,
          use_bias=False,
          use_scale=False,
          reduction_axes=(-1, -2),
      )

      def ln_per_chan(v: jax.Array):
        normalised = [
            image_layernorm()(v[..., chan]) for chan in range(v.shape[-1])
        ]
        return jnp.stack(normalised, axis=-1)

      pixels_hidden = jax.tree.map(ln_per_chan, pixels_hidden)

    kernel_sizes = tuple((k, k) for k in self.cnn_kernel_size)
    strides = tuple((s, s) for s in self.cnn_stride)

    cnn_outs = []
    for key in pixels_hidden:
      cnn_out = CNN(
          num_filters=self.cnn_output_channels,
          kernel_sizes=kernel_sizes,
          strides=strides,
          activation=self.cnn_activation,
          use_bias=self.cnn_use_bias,
          padding=self.cnn_padding,
          max_pool=self.cnn_max_pool,
          kernel_init=self.cnn_kernel_init,
      )(pixels_hidden[key])
      if self.cnn_global_pool == 'avg':
        cnn_out = jnp.mean(cnn_out, axis=(-3, -2))
      elif self.cnn_global_pool == 'max':
        cnn_out = jnp.max(cnn_out, axis=(-3, -2))
      elif self.cnn_global_pool == 'spatial_softmax':
        cnn_out = _spatial_softmax(cnn_out)
      elif self.cnn_global_pool == 'none':
        cnn_out = cnn_out.reshape(cnn_out.shape[:-3] + (-1,))
      cnn_outs.append(cnn_out)

    if not self.policy_head:
      return jnp.concatenate(cnn_outs, axis=-1)
    if self.state_obs_key:
      cnn_outs.append(data[self.state_obs_key])

    hidden = jnp.concatenate(cnn_outs, axis=-1)
    return MLP(
        layer_sizes=self.layer_sizes,
        activation=self.activation,
        kernel_init=self.kernel_init,
        output_kernel_init=self.output_kernel_init,
        activate_final=self.activate_final,
        layer_norm=self.layer_norm,
    )(hidden)


class VisionPolicyWithStd(linen.Module):
  """Vision CNN+MLP policy with separate mean and std outputs.

  Mirrors PolicyModuleWithStd but uses VisionMLP as the backbone.
  Used when distribution_type='normal'.
  """

  param_size: int
  hidden_layer_sizes: Sequence[int]
  activation: ActivationFn = linen.relu
  kernel_init: Initializer = jax.nn.initializers.lecun_uniform()
  layer_norm: bool = False
  normalise_channels: bool = False
  state_obs_key: str = ''
  noise_std_type: Literal['scalar', 'log'] = 'scalar'
  init_noise_std: float = 1.0
  state_dependent_std: bool = False
  mean_clip_scale: float | None = None
  mean_kernel_init: Initializer | None = None
  # CNN config (forwarded to VisionMLP).
  cnn_output_channels: Sequence[int] = (32, 64, 64)
  cnn_kernel_size: Sequence[int] = (8, 4, 3)
  cnn_stride: Sequence[int] = (4, 2, 1)
  cnn_padding: str = 'SAME'
  cnn_activation: ActivationFn = linen.relu
  cnn_use_bias: bool = True
  cnn_max_pool: bool = False
  cnn_global_pool: str = 'avg'
  cnn_kernel_init: Initializer = jax.nn.initializers.lecun_normal()

  @linen.compact
  def __call__(self, data: dict):
    if self.noise_std_type not in ['scalar', 'log']:
      raise ValueError(
          f'Unsupported noise std type: {self.noise_std_type}. Must be one of'
          ' "scalar" or "log".'
      )

    outputs = VisionMLP(
        layer_sizes=list(self.hidden_layer_sizes),
        activation=self.activation,
        kernel_init=self.kernel_init,
        activate_final=True,
        layer_norm=self.layer_norm,
        normalise_channels=self.normalise_channels,
        state_obs_key=self.state_obs_key,
        cnn_output_channels=self.cnn_output_channels,
        cnn_kernel_size=self.cnn_kernel_size,
        cnn_stride=self.cnn_stride,
        cnn_padding=self.cnn_padding,
        cnn_activation=self.cnn_activation,
        cnn_use_bias=self.cnn_use_bias,
        cnn_max_pool=self.cnn_max_pool,
        cnn_global_pool=self.cnn_global_pool,
        cnn_kernel_init=self.cnn_kernel_init,
    )(data)

    mean_kernel_init = (
        self.mean_kernel_init if self.mean_kernel_init is not None
        else self.kernel_init
    )
    mean_params = linen.Dense(
        self.param_size,
        kernel_init=mean_kernel_init,
    )(outputs)
    if self.mean_clip_scale is not None:
      mean_params = self.mean_clip_scale * (
          mean_params / (1.0 + jnp.abs(mean_params))
      )

    if self.state_dependent_std:
      log_std_output = linen.Dense(
          self.param_size, kernel_init=self.kernel_init
      )(outputs)
      if self.noise_std_type == 'log':
        std_params = jnp.exp(log_std_output)
      else:
        std_params = log_std_output
    else:
      if self.noise_std_type == 'scalar':
        std_module = Param(
            self.init_noise_std, size=self.param_size, name='std_param'
        )
      else:
        std_module = LogParam(
            self.init_noise_std, size=self.param_size, name='std_logparam'
        )
      std_params = std_module()

    return mean_params, jnp.broadcast_to(std_params, mean_params.shape)


def _get_obs_state_size(obs_size: types.ObservationSize, obs_key: str) -> int:
  obs_size = obs_size[obs_key] if isinstance(obs_size, Mapping) else obs_size
  return jax.tree_util.tree_flatten(obs_size)[0][-1]


class Param(linen.Module):
  """Scalar parameter module."""

  init_value: float = 0.0
  size: int = 1

  @linen.compact
  def __call__(self):
    return self.param(
        'value', init_fn=lambda keys: jnp.full((self.size,), self.init_value)
    )


class LogParam(linen.Module):
  """Scalar parameter module with log scale."""

  init_value: float = 1.0
  size: int = 1

  @linen.compact
  def __call__(self):
    log_value = self.param(
        'log_value',
        init_fn=lambda key: jnp.full((self.size,), jnp.log(self.init_value)),
    )
    return jnp.exp(log_value)


class PolicyModuleWithStd(linen.Module):
  """Policy module with learnable mean and standard deviation."""

  param_size: int
  hidden_layer_sizes: Sequence[int]
  activation: ActivationFn
  kernel_init: jax.nn.initializers.Initializer
  layer_norm: bool
  noise_std_type: Literal['scalar', 'log']
  init_noise_std: float
  state_dependent_std: bool = False
  mean_clip_scale: float | None = None
  mean_kernel_init: jax.nn.initializers.Initializer | None = None

  @linen.compact
  def __call__(self, obs):
    if self.noise_std_type not in ['scalar', 'log']:
      raise ValueError(
          f'Unsupported noise std type: {self.noise_std_type}. Must be one of'
          ' "scalar" or "log".'
      )

    outputs = MLP(
        layer_sizes=list(self.hidden_layer_sizes),
        activation=self.activation,
        kernel_init=self.kernel_init,
        layer_norm=self.layer_norm,
        activate_final=True,
    )(obs)

    mean_kernel_init = (
        self.mean_kernel_init if self.mean_kernel_init is not None
        else self.kernel_init
    )
    mean_params = linen.Dense(
        self.param_size,
        kernel_init=mean_kernel_init,
    )(outputs)
    if self.mean_clip_scale is not None:
      mean_params = self.mean_clip_scale * (
          mean_params / (1.0 + jnp.abs(mean_params))
      )

    if self.state_dependent_std:
      log_std_output = linen.Dense(
          self.param_size, kernel_init=self.kernel_init
      )(outputs)
      if self.noise_std_type == 'log':
        std_params = jnp.exp(log_std_output)
      else:
        std_params = log_std_output
    else:
      if self.noise_std_type == 'scalar':
        std_module = Param(
            self.init_noise_std, size=self.param_size, name='std_param'
        )
      else:
        std_module = LogParam(
            self.init_noise_std, size=self.param_size, name='std_logparam'
        )
      std_params = std_module()

    return mean_params, jnp.broadcast_to(std_params, mean_params.shape)


class DistributionalCritic(nn.Module):
  """Distributional critic module: https://arxiv.org/pdf/1710.10044."""

  hidden_layer_sizes: Sequence[int]
  activation: ActivationFn
  kernel_init: jax.nn.initializers.Initializer
  num_quantiles: int = 32  # Standard for QR-DQN/PPO

  @nn.compact
  def __call__(self, obs: jax.Array) -> Tuple[jax.Array, jax.Array]:
    # Output layer: num_quantiles instead of 1
    # Shape: (batch, num_quantiles)
    quantiles = MLP(
        layer_sizes=list(self.hidden_layer_sizes) + [self.num_quantiles],
        activation=self.activation,
        kernel_init=self.kernel_init,
    )(obs)

    # The expected value V(s) is the mean of the quantiles
    v_estimate = jnp.mean(quantiles, axis=-1, keepdims=True)

    return v_estimate, quantiles


def make_policy_network(
    param_size: int,
    obs_size: types.ObservationSize,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: ActivationFn = linen.relu,
    kernel_init: Initializer = jax.nn.initializers.lecun_uniform(),
    layer_norm: bool = False,
    obs_key: str = 'state',
    distribution_type: Literal['normal', 'tanh_normal'] = 'tanh_normal',
    noise_std_type: Literal['scalar', 'log'] = 'scalar',
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    mean_clip_scale: float | None = None,
    mean_kernel_init: Initializer | None = None,
) -> FeedForwardNetwork:
  """Creates a policy network."""
  if distribution_type == 'tanh_normal':
    policy_module = MLP(
        layer_sizes=list(hidden_layer_sizes) + [param_size],
        activation=activation,
        kernel_init=kernel_init,
        layer_norm=layer_norm,
    )
  elif distribution_type == 'normal':
    policy_module = PolicyModuleWithStd(
        param_size=param_size,
        hidden_layer_sizes=hidden_layer_sizes,
        activation=activation,
        kernel_init=kernel_init,
        layer_norm=layer_norm,
        noise_std_type=noise_std_type,
        init_noise_std=init_noise_std,
        state_dependent_std=state_dependent_std,
        mean_clip_scale=mean_clip_scale,
        mean_kernel_init=mean_kernel_init,
    )
  else:
    raise ValueError(
        f'Unsupported distribution type: {distribution_type}. Must be one'
        ' of "normal" or "tanh_normal".'
    )

  def apply(processor_params, policy_params, obs):
    if isinstance(obs, Mapping):
      obs = preprocess_observations_fn(
          obs[obs_key], normalizer_select(processor_params, obs_key)
      )
    else:
      obs = preprocess_observations_fn(obs, processor_params)
    return policy_module.apply(policy_params, obs)

  obs_size = _get_obs_state_size(obs_size, obs_key)
  dummy_obs = jnp.zeros((1, obs_size))

  def init(key):
    policy_module_params = policy_module.init(key, dummy_obs)
    return policy_module_params

  return FeedForwardNetwork(init=init, apply=apply)


def make_value_network(
    obs_size: types.ObservationSize,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: ActivationFn = linen.relu,
    obs_key: str = 'state',
    kernel_init: Initializer = jax.nn.initializers.lecun_uniform(),
    use_distributional_critic: bool = False,
    num_quantiles: int = 32,
) -> FeedForwardNetwork:
  """Creates a value network."""
  if use_distributional_critic:
    value_module = DistributionalCritic(
        hidden_layer_sizes=list(hidden_layer_sizes),
        activation=activation,
        kernel_init=kernel_init,
        num_quantiles=num_quantiles,
    )
  else:
    value_module = MLP(
        layer_sizes=list(hidden_layer_sizes) + [1],
        activation=activation,
        kernel_init=kernel_init,
    )

  def apply(processor_params, value_params, obs):
    if isinstance(obs, Mapping):
      obs = preprocess_observations_fn(
          obs[obs_key], normalizer_select(processor_params, obs_key)
      )
    else:
      obs = preprocess_observations_fn(obs, processor_params)
    if use_distributional_critic:
      v_estimate, quantiles = value_module.apply(value_params, obs)
      return jnp.squeeze(v_estimate, axis=-1), quantiles
    else:
      return jnp.squeeze(value_module.apply(value_params, obs), axis=-1)

  obs_size = _get_obs_state_size(obs_size, obs_key)
  dummy_obs = jnp.zeros((1, obs_size))
  return FeedForwardNetwork(
      init=lambda key: value_module.init(key, dummy_obs), apply=apply
  )


def make_q_network(
    obs_size: types.ObservationSize,
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: ActivationFn = linen.relu,
    n_critics: int = 2,
    layer_norm: bool = False,
    kernel_init: Initializer = jax.nn.initializers.lecun_uniform(),
) -> FeedForwardNetwork:
  """Creates a value network."""

  class QModule(linen.Module):
    """Q Module."""

    n_critics: int

    @linen.compact
    def __call__(self, obs: jnp.ndarray, actions: jnp.ndarray):
      hidden = jnp.concatenate([obs, actions], axis=-1)
      res = []
      for _ in range(self.n_critics):
        q = MLP(
            layer_sizes=list(hidden_layer_sizes) + [1],
            activation=activation,
            kernel_init=kernel_init,
            layer_norm=layer_norm,
        )(hidden)
        res.append(q)
      return jnp.concatenate(res, axis=-1)

  q_module = QModule(n_critics=n_critics)

  def apply(processor_params, q_params, obs, actions):
    obs = preprocess_observations_fn(obs, processor_params)
    return q_module.apply(q_params, obs, actions)

  dummy_obs = jnp.zeros((1, obs_size))
  dummy_action = jnp.zeros((1, action_size))
  return FeedForwardNetwork(
      init=lambda key: q_module.init(key, dummy_obs, dummy_action), apply=apply
  )


def make_model(
    layer_sizes: Sequence[int],
    obs_size: int,
    activation: Callable[[jnp.ndarray], jnp.ndarray] = linen.swish,
    spectral_norm: bool = False,
) -> FeedForwardNetwork:
  """Creates a model.

  Args:
    layer_sizes: layers
    obs_size: size of an observation
    activation: activation
    spectral_norm: whether to use a spectral normalization (default: False).

  Returns:
    a model
  """
  warnings.warn(
      'make_model is deprecated, use make_{policy|q|value}_network instead.'
  )
  dummy_obs = jnp.zeros((1, obs_size))
  if spectral_norm:
    module = SNMLP(layer_sizes=layer_sizes, activation=activation)
    model = FeedForwardNetwork(
        init=lambda rng1, rng2: module.init(
            {'params': rng1, 'sing_vec': rng2}, dummy_obs
        ),
        apply=module.apply,
    )
  else:
    module = MLP(layer_sizes=layer_sizes, activation=activation)
    model = FeedForwardNetwork(
        init=lambda rng: module.init(rng, dummy_obs), apply=module.apply
    )
  return model


def make_models(
    policy_params_size: int, obs_size: int
) -> Tuple[FeedForwardNetwork, FeedForwardNetwork]:
  """Creates models for policy and value functions.

  Args:
    policy_params_size: number of params that a policy network should generate
    obs_size: size of an observation

  Returns:
    a model for policy and a model for value function
  """
  warnings.warn(
      'make_models is deprecated, use make_{policy|q|value}_network instead.'
  )
  policy_model = make_model([32, 32, 32, 32, policy_params_size], obs_size)
  value_model = make_model([256, 256, 256, 256, 256, 1], obs_size)
  return policy_model, value_model


def normalizer_select(
    processor_params: running_statistics.RunningStatisticsState, obs_key: str
) -> running_statistics.RunningStatisticsState:
  return running_statistics.RunningStatisticsState(
      count=processor_params.count,
      mean=processor_params.mean[obs_key],
      summed_variance=processor_params.summed_variance[obs_key],
      std=processor_params.std[obs_key],
  )


def make_policy_network_vision(
    observation_size: Mapping[str, Tuple[int, ...]],
    output_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = [256, 256],
    activation: ActivationFn = linen.swish,
    kernel_init: Initializer = jax.nn.initializers.lecun_uniform(),
    layer_norm: bool = False,
    state_obs_key: str = '',
    normalise_channels: bool = False,
    distribution_type: Literal['tanh_normal', 'normal'] = 'tanh_normal',
    noise_std_type: Literal['scalar', 'log'] = 'scalar',
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    mean_clip_scale: float | None = None,
    mean_kernel_init: Initializer | None = None,
    cnn_output_channels: Sequence[int] = (32, 64, 64),
    cnn_kernel_size: Sequence[int] = (8, 4, 3),
    cnn_stride: Sequence[int] = (4, 2, 1),
    cnn_padding: str = 'SAME',
    cnn_activation: ActivationFn = linen.relu,
    cnn_max_pool: bool = False,
    cnn_global_pool: str = 'avg',
    cnn_kernel_init: Initializer = jax.nn.initializers.lecun_normal(),
    output_kernel_init: Initializer | None = None,
) -> FeedForwardNetwork:
  """Creates a policy network for vision inputs."""
  if distribution_type == 'tanh_normal':
    module = VisionMLP(
        layer_sizes=list(hidden_layer_sizes) + [output_size],
        activation=activation,
        kernel_init=kernel_init,
        output_kernel_init=output_kernel_init,
        layer_norm=layer_norm,
        normalise_channels=normalise_channels,
        state_obs_key=state_obs_key,
        cnn_output_channels=cnn_output_channels,
        cnn_kernel_size=cnn_kernel_size,
        cnn_stride=cnn_stride,
        cnn_padding=cnn_padding,
        cnn_activation=cnn_activation,
        cnn_max_pool=cnn_max_pool,
        cnn_global_pool=cnn_global_pool,
        cnn_kernel_init=cnn_kernel_init,
    )
  elif distribution_type == 'normal':
    module = VisionPolicyWithStd(
        param_size=output_size,
        hidden_layer_sizes=hidden_layer_sizes,
        activation=activation,
        kernel_init=kernel_init,
        layer_norm=layer_norm,
        normalise_channels=normalise_channels,
        state_obs_key=state_obs_key,
        noise_std_type=noise_std_type,
        init_noise_std=init_noise_std,
        state_dependent_std=state_dependent_std,
        mean_clip_scale=mean_clip_scale,
        mean_kernel_init=mean_kernel_init,
        cnn_output_channels=cnn_output_channels,
        cnn_kernel_size=cnn_kernel_size,
        cnn_stride=cnn_stride,
        cnn_padding=cnn_padding,
        cnn_activation=cnn_activation,
        cnn_max_pool=cnn_max_pool,
        cnn_global_pool=cnn_global_pool,
        cnn_kernel_init=cnn_kernel_init,
    )
  else:
    raise ValueError(
        f'Unsupported distribution type: {distribution_type}. Must be one'
        ' of "normal" or "tanh_normal".'
    )

  def apply(processor_params, policy_params, obs):
    if state_obs_key:
      state_obs = preprocess_observations_fn(
          obs[state_obs_key], normalizer_select(processor_params, state_obs_key)
      )
      obs = {**obs, state_obs_key: state_obs}
    return module.apply(policy_params, obs)

  dummy_obs = {
      key: jnp.zeros((1,) + shape) for key, shape in observation_size.items()
  }
  return FeedForwardNetwork(
      init=lambda key: module.init(key, dummy_obs), apply=apply
  )


def make_value_network_vision(
    observation_size: Mapping[str, Tuple[int, ...]],
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = [256, 256],
    activation: ActivationFn = linen.swish,
    kernel_init: Initializer = jax.nn.initializers.lecun_uniform(),
    state_obs_key: str = '',
    normalise_channels: bool = False,
    cnn_output_channels: Sequence[int] = (32, 64, 64),
    cnn_kernel_size: Sequence[int] = (8, 4, 3),
    cnn_stride: Sequence[int] = (4, 2, 1),
    cnn_padding: str = 'SAME',
    cnn_activation: ActivationFn = linen.relu,
    cnn_max_pool: bool = False,
    cnn_global_pool: str = 'avg',
    cnn_kernel_init: Initializer = jax.nn.initializers.lecun_normal(),
) -> FeedForwardNetwork:
  """Creates a value network for vision inputs."""
  value_module = VisionMLP(
      layer_sizes=list(hidden_layer_sizes) + [1],
      activation=activation,
      kernel_init=kernel_init,
      normalise_channels=normalise_channels,
      state_obs_key=state_obs_key,
      cnn_output_channels=cnn_output_channels,
      cnn_kernel_size=cnn_kernel_size,
      cnn_stride=cnn_stride,
      cnn_padding=cnn_padding,
      cnn_activation=cnn_activation,
      cnn_max_pool=cnn_max_pool,
      cnn_global_pool=cnn_global_pool,
      cnn_kernel_init=cnn_kernel_init,
  )

  def apply(processor_params, policy_params, obs):
    if state_obs_key:
      state_obs = preprocess_observations_fn(
          obs[state_obs_key], normalizer_select(processor_params, state_obs_key)
      )
      obs = {**obs, state_obs_key: state_obs}
    return jnp.squeeze(value_module.apply(policy_params, obs), axis=-1)

  dummy_obs = {
      key: jnp.zeros((1,) + shape) for key, shape in observation_size.items()
  }
  return FeedForwardNetwork(
      init=lambda key: value_module.init(key, dummy_obs), apply=apply
  )


def make_policy_network_latents(
    param_size: int,
    observation_size: types.ObservationSize,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: ActivationFn = linen.relu,
    kernel_init: Initializer = jax.nn.initializers.lecun_uniform(),
    layer_norm: bool = False,
    obs_key: str = 'state',
) -> FeedForwardNetwork:
  """Creates a policy network. Wraps MLPLatents.

  Has same API as make_policy_network. Used when the env observation has image
  latents rather than pixels.

  Returns:
    A FeedForwardNetwork that takes observations and returns policy
    parameters.
  """
  module = MLPHead(
      layer_sizes=list(hidden_layer_sizes) + [param_size],
      activation=activation,
      kernel_init=kernel_init,
      layer_norm=layer_norm,
      state_key=obs_key,
  )

  def apply(processor_params, policy_params, obs):
    if obs_key:
      state_obs = preprocess_observations_fn(
          obs[obs_key], normalizer_select(processor_params, obs_key)
      )
      obs = {**obs, obs_key: state_obs}
    return module.apply(policy_params, obs)

  if not isinstance(observation_size, Mapping):
    raise NotImplementedError(
        'make_policy_network_latents only implemented for dictionary'
        ' observations'
    )

  dummy_obs = {
      key: jnp.zeros((1,) + shape) for key, shape in observation_size.items()
  }
  return FeedForwardNetwork(
      init=lambda key: module.init(key, dummy_obs), apply=apply
  )
