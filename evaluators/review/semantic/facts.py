"""What a caller in another file of the reviewed tree can rely on about a function it imports:
the facts project.py works out once per module, read wherever a call crosses a file.
"""
from __future__ import annotations

from dataclasses import dataclass

from jaxmem.evaluators.review.semantic.jit import JitInfo


@dataclass(frozen=True)
class FunctionFacts:
    """What a caller in another file can rely on about a module-level function or callable."""

    jit: JitInfo | None  # a jitted callable: how it was made (params, donation, static arguments)
    returns: str | None  # kind of its results (the default reading)
    returns_strict: str | None  # kind of its results, where every return proves it
    trains: bool  # takes gradients or applies an optimizer (in its body or one call deep)
    makes_jit: JitInfo | None = None  # a factory: the jitted callable it returns
    makes_returns: tuple[str | None, str | None] = (None, None)  # a factory of a def: its results' kinds
    jit_maker: JitInfo | None = None  # a jit decorator maker: `pmap = functools.partial(jax.pmap, ...)`
    reads_clock: bool = False  # its body reads the time (a timer helper: `tick`, `tock`)
    clock_context: bool = False  # a context manager that times its block
    clock: bool = False  # the name is a clock itself (`timer = time.perf_counter`)
    network: str | None = None  # a network class (a framework Module subclass): its framework
    loads: bool = False  # reads arrays from a file (loads.py): its results are data sets or weights
    grad_decorated: str | None = None  # `@jax.value_and_grad` on it and no jit: calls take gradients eagerly
    forward: bool = False  # a network class's method that runs its layers (helpers.runs_layers)
    # Parameters its body turns into host values (`float(loss)`), with how, and its signature
    # (helpers.signature): a call handing it device arrays reads them on the host (JM101).
    converts: tuple[tuple[str, str], ...] = ()
    signature: tuple[tuple[str, ...], str | None] = ((), None)
    array_params: tuple[str, ...] = ()  # parameters annotated as arrays (`start: Float[Array, "D"]`)
    periodic: bool = False  # answers a periodic test (`itstime(step, every_n)`): branches.periodic_predicate
    parts: tuple[str | None, ...] = ()  # per position of the tuple it returns: kinds.returned_parts
    makes_jits: tuple[JitInfo | None, ...] = ()  # per position of that tuple: the jitted callable there
    host_reads: bool = False  # its body copies device values to the host somewhere (hostreads.py)
    one_step: bool = False  # one training step per call (training.steps_once): a loop calling it steps
