"""Hypothesis settings profiles: a fast one, applied on import, and a thorough one for nightly
runs, one environment variable away."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

__all__ = ["PROFILE_ENV", "load_profile"]

PROFILE_ENV = "AGENTSM_HYPOTHESIS_PROFILE"

_UNCHOSEN = ("default", "ci")
"""The profiles hypothesis loads by itself ("ci" when it sees a CI environment)."""

_BASE = settings.get_profile("ci") if settings.get_current_profile_name() == "ci" else None
"""Under CI the agentsm profiles keep hypothesis's CI settings (derandomized, no database)."""

settings.register_profile(
    "agentsm-fast",
    parent=_BASE,
    max_examples=25,
    stateful_step_count=10,
    deadline=None,
    phases=[p for p in Phase if p is not Phase.explain],  # explaining re-runs every shrunk case
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "agentsm-thorough",
    parent=_BASE,
    max_examples=1000,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def load_profile(default: str = "agentsm-fast") -> str:
    """Load the profile named by $AGENTSM_HYPOTHESIS_PROFILE (`agentsm-fast` or
    `agentsm-thorough`, or one of your own); returns its name."""
    name = os.environ.get(PROFILE_ENV) or default
    settings.load_profile(name)
    return name


def apply_default_profile() -> None:
    """On import of agentsm.testing: load $AGENTSM_HYPOTHESIS_PROFILE (agentsm-fast when unset)
    unless a hypothesis profile of your own is loaded already (which then stays in force)."""
    if settings.get_current_profile_name() in _UNCHOSEN:
        load_profile()
