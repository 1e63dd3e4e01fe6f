"""Hypothesis settings profiles: a fast one for CI, a thorough one for nightly runs."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["PROFILE_ENV", "load_profile"]

PROFILE_ENV = "AGENTSM_HYPOTHESIS_PROFILE"

settings.register_profile(
    "agentsm-fast",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "agentsm-thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def load_profile(default: str = "agentsm-fast") -> str:
    """Load the profile named by $AGENTSM_HYPOTHESIS_PROFILE (`agentsm-fast` or
    `agentsm-thorough`, or one of your own); returns its name."""
    name = os.environ.get(PROFILE_ENV, default)
    settings.load_profile(name)
    return name
