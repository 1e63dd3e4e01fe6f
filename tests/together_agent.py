"""A parent whose sub-agent runs its own transition table (a Checking state the parent lacks),
for the tests of pictures of a sub-agent run drawn with its parent's builder."""

from __future__ import annotations

from agentsm import AgentBuilder, build_transition_table

from .subagent_agent import ParentLlm, researcher


def checked(task: str) -> AgentBuilder:
    """The child agent: the researcher, with a Checking state after each observation."""
    table = (
        build_transition_table()
        .without_rows(("Observing", "Continue"))
        .with_rows({("Observing", "Continue"): "Checking", ("Checking", "Checked"): "Planning"})
    )
    return researcher(task).transitions(table).handler("Checking", lambda ctx: "Checked")


def make_agent(task: str) -> AgentBuilder:
    """The parent agent, on the default table."""
    return (
        AgentBuilder(task)
        .system_prompt("You delegate research.")
        .llm(ParentLlm())
        .subagent("researcher", "Delegate one research question.", checked)
    )
