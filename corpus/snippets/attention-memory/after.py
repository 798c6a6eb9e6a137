"""The same gradient with the queries processed in checkpointed blocks of 256.

`jax.lax.map` runs one block at a time, so only a 256 x 2048 slice of the scores exists at once,
and `jax.checkpoint` makes the backward pass recompute each block's probabilities instead of
keeping all of them. On GPU/TPU a fused kernel (cuDNN via implementation="cudnn", splash
attention) achieves the same without the loop.
"""
import jax
import jax.numpy as jnp

B, T, N, H, C = 1, 2048, 8, 64, 256


def chunked_attention(q, k, v):
    blocks = q.reshape(B, T // C, C, N, H).swapaxes(0, 1)
    starts = jnp.arange(T // C) * C

    @jax.checkpoint
    def block(args):
        qb, start = args
        logits = jnp.einsum("bqnh,bknh->bnqk", qb, k) / jnp.sqrt(H)
        causal = (start + jnp.arange(C))[:, None] >= jnp.arange(T)[None, :]
        p = jax.nn.softmax(jnp.where(causal, logits, -jnp.inf), axis=-1)
        return jnp.einsum("bnqk,bknh->bqnh", p, v)

    return jax.lax.map(block, (blocks, starts)).swapaxes(0, 1).reshape(B, T, N, H)


def loss(q, k, v):
    return chunked_attention(q, k, v).sum()


grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def example_args():
    q = jax.random.normal(jax.random.key(0), (B, T, N, H))
    return q, q, q


out = grads(*example_args())
jax.block_until_ready(out)
