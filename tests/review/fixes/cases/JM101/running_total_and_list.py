"""Per-step reads kept on the device: a running total and a list of losses."""
import jax
import jax.numpy as jnp


@jax.jit
def step(w, x):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.01 * grad, loss


def fit(w, batches):
    total = 0.0
    losses = []
    for x in batches:
        w, loss = step(w, x)
        total += float(loss)          # waits every step
        losses.append(loss.item())
    return w, total, losses


def fit_plain(w, batches):
    for x in batches:
        w, loss = step(w, x)
        lossf = loss.item()
        print(f"loss {lossf:.4f}")
    return w


def fit_weighted(w, batches, hist):
    total = 0.0
    for i, x in enumerate(batches):
        w, loss = step(w, x)
        total += float(loss) * x.shape[0]      # weighted by the batch size
        hist = hist.at[i].set(float(loss))
    return w, total, hist
