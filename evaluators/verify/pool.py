"""Which verifier runs a job: the one choice every front end (web, Slack, CLI) makes the same way."""
from __future__ import annotations

from jaxmem.core.settings import Settings
from jaxmem.evaluators.verify.jobs import LocalVerifier


def verifier_for(settings: Settings):
    """The Ray cluster at JAXMEM_RAY_ADDRESS, else this machine's queue."""
    if settings.ray_address:
        from jaxmem.evaluators.verify.ray_jobs import RayVerifier  # ray only where a cluster is used

        return RayVerifier(settings)
    return LocalVerifier(settings)
