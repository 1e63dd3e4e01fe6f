"""Schema evolution: each kind of fact has a version, older versions are upcast on read, and a
fact this code cannot read stops only the run that holds it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from agentsm import (
    AgentBuilder,
    FactVersionTooNew,
    LlmResponse,
    MockLlmCaller,
    UnreadableFact,
)
from agentsm import facts as f
from agentsm.codec import FactCodec
from agentsm.facts import FACTS
from eventstore import NewEvent, SQLiteEventStore
from replay import Recording
from replay.cli import main

LONG = "The answer, which is long enough to be accepted."
LEGACY = Path(__file__).parent / "fixtures" / "legacy" / "legacy-0.1.0.db"


@pytest.fixture
def legacy_db(tmp_path: Path) -> Path:
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY, db)
    return db


class FinalAnswerProducedV2(BaseModel):
    """FinalAnswerProduced as a later agentsm might write it: with the answer's language."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    version: ClassVar[int] = 2
    kind: Literal["FinalAnswerProduced"] = "FinalAnswerProduced"
    text: str
    language: str


def codec_with_final_answer_v2() -> FactCodec:
    kinds: list[type[BaseModel]] = [t for t in FACTS.types if t is not f.FinalAnswerProduced]
    codec = FactCodec([*kinds, FinalAnswerProducedV2])

    @codec.register("FinalAnswerProduced", 1)
    def _(old: dict[str, Any]) -> dict[str, Any]:
        return {"kind": old["kind"], "text": old["content"], "language": "en"}

    return codec


def test_facts_are_written_with_the_version_of_their_kind() -> None:
    store = SQLiteEventStore(":memory:")
    engine = AgentBuilder("t").llm(MockLlmCaller([LlmResponse.final_answer(LONG)])).store(store)
    run = engine.build()
    run.run()
    stored = store.read(run.run_id)
    assert stored and all(e.version == FACTS.version(e.kind) for e in stored)


def test_an_upcaster_turns_version_1_facts_of_an_old_log_into_version_2(
    legacy_db: Path,
) -> None:
    codec = codec_with_final_answer_v2()
    store = SQLiteEventStore(legacy_db, create=False)
    answers = [
        codec.decode(e.payload, e.kind, e.version, run_id=e.run_id, seq=e.seq)
        for r in store.runs()
        for e in store.read(r.run_id)
        if e.kind == "FinalAnswerProduced"
    ]
    assert len(answers) == 8  # one in each run that finished with an answer
    assert all(isinstance(a, FinalAnswerProducedV2) and a.language == "en" for a in answers)
    assert answers[0].text == LONG
    # and a version 2 fact is read as it is, without upcasting
    again = codec.decode(codec.encode(answers[0]), "FinalAnswerProduced", 2)
    assert again == answers[0]


def test_the_log_readers_upcast_through_the_registered_upcasters(
    legacy_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(FACTS.versions, "FinalAnswerProduced", 2)
    monkeypatch.setitem(
        FACTS.upcasters,
        ("FinalAnswerProduced", 1),
        lambda old: {**old, "content": old["content"].upper()},
    )
    entries = Recording.load(SQLiteEventStore(legacy_db, create=False), "answer").entries
    answer = [e.fact for e in entries if isinstance(e.fact, f.FinalAnswerProduced)]
    assert answer[0].content == LONG.upper()


def test_a_missing_upcaster_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FACTS.versions, "StepStarted", 3)
    monkeypatch.setitem(FACTS.upcasters, ("StepStarted", 1), lambda old: old)
    with pytest.raises(UnreadableFact, match="no upcaster turns version 2 into 3"):
        FACTS.decode('{"kind": "StepStarted", "step": 1}', "StepStarted", 1, run_id="r", seq=3)


def _log_with_a_bad_run(db: Path, bad: NewEvent) -> None:
    store = SQLiteEventStore(db)
    for run_id in ("good", "bad"):
        builder = AgentBuilder("t").llm(MockLlmCaller([LlmResponse.final_answer(LONG)]))
        builder.store(store).run_id(run_id).build().run()
    store.create_run("worse", "t")
    first = store.read("bad")[0]
    store.append("worse", 0, [NewEvent(first.kind, first.payload, "{}", 0.0), bad])


def test_a_fact_newer_than_the_code_stops_that_run_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    _log_with_a_bad_run(db, NewEvent("StepStarted", '{"kind":"StepStarted","step":1}', version=9))
    with pytest.raises(FactVersionTooNew) as caught:
        Recording.load(SQLiteEventStore(db), "worse")
    message = str(caught.value)
    assert "Run worse" in message and "StepStarted fact at seq 2 is version 9" in message
    assert "newer than version 1" in message
    assert main(["--db", str(db), "runs"]) == 0  # the catalog lists it: no fact is decoded
    out, err = capsys.readouterr()
    assert "good" in out and "bad" in out and "worse" in out and not err
    assert main(["--db", str(db), "show", "good"]) == 0
    capsys.readouterr()
    assert main(["--db", str(db), "show", "worse"]) == 2
    assert capsys.readouterr().err == f"agentsm: {message}\n"


def test_a_fact_that_old_code_committed_as_null_is_reported_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"  # what 0.1.0 wrote for a NaN confidence
    payload = '{"kind":"ConfidenceLow","confidence":null,"threshold":0.4}'
    _log_with_a_bad_run(db, NewEvent("ConfidenceLow", payload))
    assert main(["--db", str(db), "runs"]) == 0
    assert "worse" in capsys.readouterr().out
    assert main(["--db", str(db), "show", "worse"]) == 2
    err = capsys.readouterr().err
    assert "Run worse cannot be read: its ConfidenceLow fact at seq 2 does not decode" in err
    with pytest.raises(UnreadableFact, match="knows no fact kind"):
        FACTS.decode("{}", "Unheard", 1, run_id="r", seq=1)
