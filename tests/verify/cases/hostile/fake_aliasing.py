# Donates nothing, but makes every array the probe asks about look deleted (as a donated input is
# after its call), every array 1 GiB big, every compiled program alias its first parameter and XLA's
# memory analysis report 1 GiB aliased, in the hope of 20 calls of "donated (aliased) bytes" where
# there are none.
import sys

import jax
import jax.numpy as jnp
from jax._src.array import ArrayImpl
from jax._src.lib import _jax

real_is_deleted = ArrayImpl.is_deleted
real_modules = _jax.LoadedExecutable.hlo_modules


def from_the_probe() -> bool:
    return sys._getframe(2).f_code.co_filename.endswith("probe.py")


class FakeModule:
    def to_string(self):
        return ("HloModule jit_step, input_output_alias={ {}: (0, {}, may-alias) }, "
                "entry_computation_layout={(f32[268435456]{0}, f32[1000]{0})->f32[1000]{0}}\n")


ArrayImpl.is_deleted = lambda self: from_the_probe() or real_is_deleted(self)
ArrayImpl.nbytes = property(lambda self: 1 << 30)
_jax.LoadedExecutable.hlo_modules = lambda self: [FakeModule()]
_jax.CompiledMemoryStats.alias_size_in_bytes = property(lambda self: 1 << 30)


@jax.jit
def step(state, x):
    return state * 0.9 + x


state = jnp.zeros(1000)
for i in range(20):
    state = step(state, jnp.ones(1000))
print(float(state[0]))
