"""An import writes in the catalog what a run's facts say (replay.vouched): an export whose run
line was edited (task, status, answer, error, model, cost, steps, tokens, info, parent) is
refused whole, naming the field and both values; an unedited export imports as before."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentFailed,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    TokenUsage,
    tool,
)
from agentsm.facts import FACTS
from eventstore import EventStore, SQLiteEventStore, open_store
from replay import ImportRefused, branch_run, export_run, import_runs
from replay.cli import main
from replay.vouched import MIDWAY, vouched

from .backends import Backend

ANSWER = "Refused: the refund is above the limit of this desk."
USAGE = TokenUsage(input_tokens=1200, output_tokens=300)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def agent(script: list[LlmResponse]) -> AgentBuilder:
    return (
        AgentBuilder("Refund order 7?")
        .llm(MockLlmCaller(script))
        .tool(lookup)
        .model("gpt-4o-mini")  # priced: the summary has a cost
    )


def record(store: EventStore | Path, run_id: str = "r") -> None:
    script = [
        LlmResponse.tool_call("lookup", {"key": "order 7"}, usage=USAGE),
        LlmResponse.final_answer(ANSWER, usage=USAGE),
    ]
    agent(script).store(store).run_id(run_id).build().run()


def record_failed(store: EventStore | Path, run_id: str = "f") -> None:
    script = [LlmResponse.tool_call("lookup", {"key": "x"}, usage=USAGE)] * 3
    with pytest.raises(AgentFailed):
        agent(script).max_steps(1).store(store).run_id(run_id).build().run()


def record_waiting(store: EventStore | Path, run_id: str = "w") -> None:
    script = [LlmResponse.tool_call("lookup", {"key": "x"}), LlmResponse.final_answer(ANSWER)]
    with pytest.raises(HumanInputRequired):
        agent(script).require_approval("lookup").store(store).run_id(run_id).build().run()


def exported(db: Path, run_id: str) -> list[str]:
    with SQLiteEventStore(db) as store:
        return list(export_run(store, run_id))


def edited(lines: list[str], change: Callable[[dict[str, Any]], None]) -> list[str]:
    """The export with its (first) run line changed."""
    head = json.loads(lines[0])
    change(head)
    return [json.dumps(head), *lines[1:]]


def summary(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda head: head["summary"].update(fields)


def header(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda head: head.update(fields)


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "task": (header(task="Pay order 7"), "task 'Pay order 7' but its facts say 'Refund order 7?'"),
    "status": (header(status="failed"), "status 'failed' but its facts say 'done'"),
    "answer": (
        summary(answer="Paid 30000 dollars to the account on file, as asked."),
        "answer 'Paid 30000 dollars to the account on fil…' but its facts say 'Refused: the "
        "refund is above the limit o…'",
    ),
    "error": (
        summary(error="The bank said no."),
        "error 'The bank said no.' but its facts say null",
    ),
    "model": (summary(model="gpt-4.1"), "model 'gpt-4.1' but its facts say 'gpt-4o-mini'"),
    "steps": (summary(steps=9), "steps 9 but its facts say 2"),
    "input_tokens": (summary(input_tokens=1), "input_tokens 1 but its facts say 2400"),
    "output_tokens": (summary(output_tokens=1), "output_tokens 1 but its facts say 600"),
    "info": (header(info={"judgement": True}), 'info {"judgement": true} but its facts say {}'),
    "parent_id": (header(parent_id="p"), "parent_id 'p' but its facts say null"),
    "branch_seq": (header(branch_seq=3), "branch_seq 3 but its facts say null"),
}


@pytest.mark.parametrize("field", list(EDITS))
def test_an_edited_run_line_is_refused_naming_the_field(tmp_path: Path, field: str) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    record(source)
    record(source, "other")
    record(target, "kept")
    change, said = EDITS[field]
    first = exported(source, "other")
    lines = [*first, *edited(exported(source, "r"), change)]
    with SQLiteEventStore(target) as store:
        before = [(r.run_id, r.status, r.summary) for r in store.runs()]
        with pytest.raises(ImportRefused) as refused:
            import_runs(store, lines)
        assert str(refused.value).startswith(
            f"line {len(first) + 1}: run r: the export's header says {said}. Nothing of the "
            "file was imported"
        )
        assert [(r.run_id, r.status, r.summary) for r in store.runs()] == before


def test_the_command_line_refuses_an_edited_answer_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    record(source)
    forged = edited(exported(source, "r"), summary(answer="Paid 30000 dollars."))
    (tmp_path / "forged.jsonl").write_text("\n".join(forged) + "\n")
    assert main(["--db", str(target), "import", str(tmp_path / "forged.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "run r: the export's header says answer 'Paid 30000 dollars.' but its facts say " in err
    assert "Nothing of the file was imported" in err
    assert SQLiteEventStore(target).runs() == []


def test_a_run_that_did_not_finish_is_not_imported_as_finished(tmp_path: Path) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    record_waiting(source)
    lines = exported(source, "w")
    assert json.loads(lines[0])["status"] == "waiting"
    for status in ("done", "failed", "aborted", "paid"):
        with pytest.raises(ImportRefused, match=f"says status '{status}' but its facts say the"):
            import_runs(SQLiteEventStore(target), edited(lines, header(status=status)))
    assert "stopped" in MIDWAY  # what only the driver knew is taken from the line
    assert import_runs(SQLiteEventStore(target), edited(lines, header(status="stopped"))) == ["w"]
    assert SQLiteEventStore(target).run("w").status == "stopped"


def test_a_created_at_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    record(source)
    with pytest.raises(ImportRefused, match="created_at must be a number"):
        import_runs(SQLiteEventStore(target), edited(exported(source, "r"), header(created_at="x")))


def test_a_cost_this_process_cannot_price_is_not_kept(tmp_path: Path) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    script = [LlmResponse.final_answer(ANSWER, usage=USAGE)]
    agent(script).model("house-model").store(source).run_id("h").build().run()
    lines = edited(exported(source, "h"), summary(cost=0.5))  # priced where it was recorded
    assert import_runs(SQLiteEventStore(target), lines) == ["h"]
    imported = SQLiteEventStore(target).run("h").summary
    assert (imported.model, imported.cost, imported.tokens) == ("house-model", None, 1500)


def test_unedited_exports_import_with_the_catalog_their_facts_make(backend: Backend) -> None:
    source = backend.open()
    record(source)
    record_failed(source)
    record_waiting(source)
    child = branch_run(source, "r", 3, llm_response=LlmResponse.final_answer(ANSWER)).run_id
    runs = ["r", "f", "w", child]
    lines = [line for run_id in runs for line in export_run(source, run_id)]
    target = SQLiteEventStore(":memory:")
    assert import_runs(target, lines) == runs
    for run_id in runs:
        was, now = source.run(run_id), target.run(run_id)
        assert (now.task, now.status, now.parent_id, now.branch_seq, now.info, now.summary) == (
            was.task,
            was.status,
            was.parent_id,
            was.branch_seq,
            was.info,
            was.summary,
        )
        assert now.created_at == was.created_at
    assert target.run(child).parent_id == "r"
    assert target.run("f").summary.error and target.run("r").summary.cost == 0.00072
    assert import_runs(target, lines) == runs  # again: the same facts are left as they are


def test_an_edited_export_imports_nothing_into_postgresql(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    record(source)
    record(source, "other")
    lines = [*exported(source, "other"), *edited(exported(source, "r"), summary(steps=1))]
    target = open_store(db_url)
    with pytest.raises(ImportRefused, match="says steps 1 but its facts say 2"):
        import_runs(target, lines)
    assert target.runs() == []
    assert import_runs(target, exported(source, "r")) == ["r"]
    assert target.run("r").summary.answer == ANSWER
    target.close()


def test_vouched_needs_facts_that_begin_with_run_started(tmp_path: Path) -> None:
    db = tmp_path / "source.db"
    record(db)
    facts = [
        FACTS.decode(e.payload, e.kind, e.version, run_id="r", seq=e.seq, meta=e.meta)
        for e in SQLiteEventStore(db).read("r")
    ]
    line = json.loads(exported(db, "r")[0])
    assert vouched(line, facts, stated=True).summary.answer == ANSWER
    assert vouched(line, facts, stated=False).status == "imported"
    with pytest.raises(ValueError, match="must begin with RunStarted"):
        vouched(line, facts[1:], stated=True)


def test_the_cost_is_priced_from_the_facts_whatever_the_line_says(tmp_path: Path) -> None:
    """A cost is not recorded, it is priced (and prices change between releases): the line's is
    replaced by this process's price of the facts' tokens, never taken as it is."""
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    record(source)
    for cost in (12.5, None):
        lines = edited(exported(source, "r"), summary(cost=cost))
        with SQLiteEventStore(target) as store:
            import_runs(store, lines)
            assert store.run("r").summary.cost == 0.00072
            store.close()
        target.unlink()
