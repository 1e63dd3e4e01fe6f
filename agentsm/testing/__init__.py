"""agentsm.testing: check transition tables and property-test agents with hypothesis.

check_table(table, handlers=None)        static graph checks, a readable report
agent_runs(builder=make_agent)           finished runs of the real engine, randomly driven
AgentMachine.for_builder(make_agent)     hypothesis stateful testing of a live engine
from_recorded(db, builder=make_agent)    recorded runs, mutated, run again and checked
"""

from .checks import Problem, TableReport, check_table
from .machine import AgentMachine
from .profiles import PROFILE_ENV, apply_default_profile, load_profile
from .recorded import MUTATIONS, Mutation, Recorded, from_recorded, recorded_runs, run_recorded
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
    "MUTATIONS",
    "PROFILE_ENV",
    "AgentMachine",
    "AgentRun",
    "Mutation",
    "Observation",
    "Problem",
    "Recorded",
    "TableReport",
    "ToolBehaviour",
    "agent_runs",
    "approval_decisions",
    "check_table",
    "configs",
    "from_recorded",
    "llm_responses",
    "llm_scripts",
    "load_profile",
    "recorded_runs",
    "run_inputs",
    "run_recorded",
    "sample_agent",
    "tool_behaviours",
]
