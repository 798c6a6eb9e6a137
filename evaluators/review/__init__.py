"""Static review of JAX code for memory and host<->device transfer anti-patterns.

The library surface is `evaluators.review.api`; `cli.command` is the `jaxmem review` adapter.
"""
