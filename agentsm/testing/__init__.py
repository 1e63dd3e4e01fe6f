"""agentsm.testing: check transition tables and property-test agents with hypothesis.

check_table(table, handlers=None)        static graph checks, a readable report
agent_runs(builder=make_agent)           finished runs of the real engine, randomly driven
AgentMachine.for_builder(make_agent)     hypothesis stateful testing of a live engine
"""

from .checks import Problem, TableReport, check_table
from .machine import AgentMachine
from .profiles import PROFILE_ENV, apply_default_profile, load_profile
from .runs import AgentRun, Observation
from .strategies import (
    ToolBehaviour,
    agent_runs,
    approval_decisions,
    configs,
    llm_responses,
    llm_scripts,
    run_inputs,
    sample_agent,
    tool_behaviours,
)

apply_default_profile()  # fast unless you chose a profile: see agentsm.testing.profiles

__all__ = [
    "PROFILE_ENV",
    "AgentMachine",
    "AgentRun",
    "Observation",
    "Problem",
    "TableReport",
    "ToolBehaviour",
    "agent_runs",
    "approval_decisions",
    "check_table",
    "configs",
    "llm_responses",
    "llm_scripts",
    "load_profile",
    "run_inputs",
    "sample_agent",
    "tool_behaviours",
]
