"""Best of N: branches of one point run together, a judge picks one, everything recorded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentError,
    LlmResponse,
    MockLlmCaller,
    TokenUsage,
    tool,
)
from agentsm import facts as f
from agentsm.facts import Candidate
from agentsm.trace import Trace
from eventstore import EventStore, SQLiteEventStore
from replay import (
    BestOf,
    BestOfError,
    ChoiceRefused,
    LlmJudge,
    Variant,
    Verdict,
    best_of,
    branch_run,
    judge_again,
    judgements,
    load_best_of,
    replay_run,
    resume_run,
)
from replay.cli import cli, main
from replay.judgement import family_notes

from .stores import connect

TASK = "What is the capital of France?"


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city} is the seat of the French government"


def record_parent(db: Path) -> tuple[str, int]:
    """A finished run that looked Paris up, then answered; and the seq after its tool result
    (where the candidates branch, to write their own answers)."""
    store = SQLiteEventStore(db)
    found = record_parent_in(store)
    store.close()
    return found


def record_parent_in(store: EventStore) -> tuple[str, int]:
    """`record_parent` into any store."""
    script = [
        LlmResponse.tool_call("lookup", {"city": "Paris"}),
        LlmResponse.final_answer("The capital of France is Paris, of course."),
    ]
    engine = (
        AgentBuilder(TASK)
        .llm(MockLlmCaller(script))
        .tool(lookup)
        .config(AgentConfig(reflect_every_n_steps=0))
        .store(store)
        .run_id("parent")
        .build()
    )
    engine.run()
    at = next(e.seq for e in engine.trace() if isinstance(e.fact, f.ObservationCommitted)) + 1
    return "parent", at


def answering(text: str) -> MockLlmCaller:
    return MockLlmCaller([LlmResponse.final_answer(text)])


def longest(candidates: tuple[Candidate, ...]) -> list[float | None]:
    """A function judge: the longer the answer, the better (failed candidates unscored)."""
    return [float(len(c.answer)) if c.answer else None for c in candidates]


def test_variants_run_together_on_one_loop_and_a_function_judge_picks(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, at = record_parent(db)
    arrived: list[str] = []
    everyone = asyncio.Event()

    def meeting(text: str) -> MockLlmCaller:
        async def answer(memory: Any, tools: Any, model: str) -> LlmResponse:
            arrived.append(model)
            if len(arrived) == 3:
                everyone.set()  # only the three candidates together get past this point
            await asyncio.wait_for(everyone.wait(), 60)
            return LlmResponse.final_answer(f"{text} (asked {model})")

        return MockLlmCaller([answer])

    variants = [
        Variant(llm=meeting("Paris."), model="model-a"),
        Variant(llm=meeting("Paris, on the Seine, is the capital."), model="model-b"),
        Variant(llm=meeting("It is Paris."), model="model-c", label="third"),
    ]
    before = SQLiteEventStore(db).run(run_id).last_seq
    result = best_of(db, run_id, at, variants, longest)
    assert sorted(arrived) == ["model-a", "model-b", "model-c"]
    assert [c.status for c in result.candidates] == ["done", "done", "done"]
    assert [c.label for c in result.candidates] == ["model-a", "model-b", "third"]
    assert result.pick == 1 and result.winner is not None
    assert result.answer == "Paris, on the Seine, is the capital. (asked model-b)"
    assert result.scores == tuple(float(len(c.answer or "")) for c in result.candidates)
    store = SQLiteEventStore(db)
    for c in result.candidates:  # each a branch of the parent, saying what it changed
        record = store.run(c.run_id)
        assert (record.parent_id, record.status) == (run_id, "done")
        trace = Trace.load(store, c.run_id)
        branched = next(e.fact for e in trace if isinstance(e.fact, f.RunBranched))
        assert set(branched.changes) == {"config", "llm", "model"}
        asked = [e.fact for e in trace if isinstance(e.fact, f.LlmRequested)]
        assert asked[-1].model == c.model
        assert replay_run(db, c.run_id).identical  # each candidate replays as recorded
    judgement = store.run(result.judgement_id)
    assert (judgement.parent_id, judgement.branch_seq) == (run_id, result.at)
    assert judgement.status == "done" and judgement.summary.answer == result.answer
    assert store.run(run_id).last_seq == before  # the finished parent is never written to
    assert [e.fact.kind for e in Trace.load(store, run_id)][-1] == "RunFinished"
    kinds = [e.event for e in Trace.load(store, result.judgement_id)]
    assert kinds == ["RunStarted", "CandidatesGathered", "CandidatePicked", "RunFinished"]
    assert "pick=1" in repr(result) and "*" in result.table()
    assert replay_run(db, result.judgement_id).identical


def test_an_llm_judge_is_sent_the_task_and_answers_and_its_exchange_is_recorded(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run_id, at = record_parent(db)
    reply = '{"best": 1, "scores": {"1": 9, "2": 4}, "reason": "names the river too"}'
    judge_llm = MockLlmCaller(
        [LlmResponse(content=reply, usage=TokenUsage(input_tokens=50, output_tokens=20))]
    )
    variants = [
        Variant(answer="Paris, on the Seine, is the capital of France."),
        Variant(answer="Paris is the capital of France, I believe."),
    ]
    result = best_of(db, run_id, at, variants, LlmJudge(judge_llm, model="judge-model"))
    assert (result.pick, result.reason, result.scores) == (0, "names the river too", (9.0, 4.0))
    sent = judge_llm.calls[0]
    assert sent.model == "judge-model" and TASK in sent.task
    assert "Candidate 1" in sent.task and "on the Seine" in sent.task
    assert (
        "I believe" in sent.task and sent.memory.system_prompt == LlmJudge(judge_llm).system_prompt
    )
    # read back through another store object: the judgement is in the log
    other = SQLiteEventStore(db)
    [again] = judgements(other, run_id)
    assert again == load_best_of(other, result.judgement_id)
    assert (again.pick, again.prompt, again.judge_answer) == (0, sent.task, reply)
    assert again.judge == "llm judge-model" and again.winner == result.winner
    facts = [e.fact for e in Trace.load(other, result.judgement_id)]
    asked = next(x for x in facts if isinstance(x, f.JudgeAsked))
    answered = next(x for x in facts if isinstance(x, f.JudgeAnswered))
    assert asked.prompt == sent.task and answered.response.content == reply
    assert other.run(result.judgement_id).summary.tokens == 70
    assert replay_run(other, result.judgement_id).identical  # prompt rebuilt, answer served
    notes = family_notes(other, other.runs())
    assert notes[result.candidates[0].run_id] == f"★ picked by {result.judgement_id}"


class Tuned(MockLlmCaller):
    """A scripted LLM that declares request settings, as provider callers do."""

    settings = {"provider": "mock", "temperature": 0.2}


def test_failed_candidates_lose_and_a_choice_of_one_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, at = record_parent(db)
    variants = [
        Variant(llm=MockLlmCaller([RuntimeError("provider down")]), model="flaky"),
        Variant(config={"max_steps": 1}, label="no steps left"),
        Variant(llm=Tuned([LlmResponse.final_answer("Paris is the capital of France.")])),
    ]
    with pytest.raises(ChoiceRefused, match="did not finish") as refused:
        best_of(db, run_id, at, variants, lambda candidates: 0)
    lost = refused.value.result
    assert isinstance(refused.value, AgentError) and isinstance(refused.value, ValueError)
    assert [c.status for c in lost.candidates] == ["failed", "failed", "done"]
    assert "provider down" in (lost.candidates[0].error or "")
    assert "max" in (lost.candidates[1].error or "").lower()
    assert lost.pick is None and lost.refused is not None and "finished: 2" in lost.refused
    assert lost.candidates[2].llm == {"provider": "mock", "temperature": 0.2}
    assert lost.candidates[2].label == "variant 2" and lost.candidates[2].changes == ("llm",)
    store = SQLiteEventStore(db)
    assert store.run(lost.judgement_id).status == "failed"  # the refusal is recorded too
    assert replay_run(db, lost.judgement_id).identical

    # the same candidates, judged again: an unknown one is refused, the finished one wins
    with pytest.raises(ChoiceRefused, match="there is none"):
        judge_again(db, lost.judgement_id, lambda candidates: 7)
    with pytest.raises(ChoiceRefused, match="returned 'the third'"):
        judge_again(db, lost.judgement_id, lambda candidates: "the third")
    picked = judge_again(db, lost.judgement_id, lambda cs: Verdict(2, reason="the one left"))
    assert picked.pick == 2 and picked.answer == "Paris is the capital of France."
    assert picked.candidates == lost.candidates
    assert [j.pick for j in judgements(db, run_id)] == [None, None, None, 2]
    assert SQLiteEventStore(db).run(picked.judgement_id).status == "done"
    for odd, problem in (
        (Verdict(pick="2"), "must be a candidate's index"),  # type: ignore[arg-type]
        (Verdict(2, reason=7), "must be text"),  # type: ignore[arg-type]
        ([1.0, float("nan"), 2.0], "finite numbers"),
        ([1.0], "1 scores for 3 candidates"),
        (Verdict(2, reason="\ud800"), "cannot be recorded"),
    ):
        with pytest.raises(ChoiceRefused, match=problem):
            judge_again(db, lost.judgement_id, lambda cs, odd=odd: odd)  # type: ignore[misc]
    scored = judge_again(db, lost.judgement_id, lambda cs: [10.0, 9.0, 1.0])
    assert scored.pick == 2  # scores of candidates that failed do not win
    # a judgement is no agent: it is neither branched nor resumed
    assert resume_run(db, picked.judgement_id, lambda task: AgentBuilder(task)) == picked.answer
    with pytest.raises(BestOfError, match="not resumed"):
        resume_run(db, lost.judgement_id, lambda task: AgentBuilder(task))
    with pytest.raises(AgentError, match="not an agent run"):
        branch_run(db, picked.judgement_id, 2)
    with pytest.raises(BestOfError, match="not an agent run"):
        best_of(db, picked.judgement_id, 2, [Variant(answer="Paris is the capital.")], longest)

    # no candidate finished: nothing to judge, no pick, no error
    nothing = best_of(
        db, run_id, at, [Variant(llm=MockLlmCaller([RuntimeError("down")]), model="x")], longest
    )
    assert nothing.pick is None and nothing.refused == "no candidate finished: nothing to judge"
    assert {r.status for r in SQLiteEventStore(db).runs()} == {"done", "failed"}  # none hangs


def test_an_llm_judge_naming_a_failed_candidate_or_none_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, at = record_parent(db)
    variants = [
        Variant(answer="Paris is the capital of France, on the Seine."),
        Variant(llm=MockLlmCaller([RuntimeError("down")]), model="gone"),
    ]
    judge = LlmJudge(MockLlmCaller([LlmResponse.final_answer('{"best": 2}')]))
    with pytest.raises(ChoiceRefused, match="picked candidate 1 .* which did not finish"):
        best_of(db, run_id, at, variants, judge)
    rambling = LlmJudge(MockLlmCaller([LlmResponse.final_answer("They are both fine.")]))
    with pytest.raises(ChoiceRefused, match="names no candidate"):
        best_of(db, run_id, at, variants, rambling)
    broken = LlmJudge(MockLlmCaller([RuntimeError("judge offline")]))
    with pytest.raises(ChoiceRefused, match="judge offline") as failed:
        best_of(db, run_id, at, variants, broken)
    assert replay_run(db, failed.value.judgement_id).identical


def test_bad_requests_are_refused_before_anything_runs(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, at = record_parent(db)
    with pytest.raises(ValueError, match="at least one Variant"):
        best_of(db, run_id, at, [], longest)
    with pytest.raises(ValueError, match="no LLM would answer it"):
        best_of(db, run_id, at, [Variant(model="gpt-x")], longest)
    with pytest.raises(ValueError, match="not a judge"):
        best_of(db, run_id, at, [Variant(answer="Paris.")], "the best one")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no field 'max_step'"):
        best_of(db, run_id, at, [Variant(config={"max_step": 2})], longest)
    assert [r.run_id for r in SQLiteEventStore(db).runs()] == [run_id]


def test_best_of_on_each_backend(log_url: str) -> None:
    store = connect(log_url)
    run_id, at = record_parent_in(store)
    variants = [
        Variant(answer="Paris is the capital of France."),
        Variant(answer="Paris, on the Seine, is the capital of France."),
    ]
    result = best_of(store, run_id, at, variants, longest)
    assert result.pick == 1 and [c.status for c in result.candidates] == ["done", "done"]
    [again] = judgements(connect(log_url), run_id)
    assert again == result
    assert replay_run(store, result.judgement_id).identical
    assert all(replay_run(store, c.run_id).identical for c in result.candidates)


AGENT = '''
from agentsm import AgentBuilder, AgentConfig, LlmResponse, tool

class EchoModel:
    """Answers with the model it is asked for; as a judge, picks the last candidate."""

    async def call(self, memory, tools, model):
        if model == "judge":
            return LlmResponse.final_answer('{"best": 2, "reason": "the bigger model"}')
        return LlmResponse.final_answer(f"Paris, says {model}, is the capital.")

@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return "never run: the parent's result is served"

def make_agent(task):
    return (
        AgentBuilder(task)
        .llm(EchoModel())
        .tool(lookup)
        .config(AgentConfig(reflect_every_n_steps=0))
    )

def shortest(candidates):
    return min((c for c in candidates if c.finished), key=lambda c: len(c.answer)).index
'''


def test_best_of_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "runs.db"
    run_id, at = record_parent(db)
    (tmp_path / "myagent.py").write_text(AGENT)
    builder = f"{tmp_path / 'myagent.py'}:make_agent"
    runner = CliRunner()
    by_model = runner.invoke(
        cli,
        [
            "best-of", run_id, "--at", str(at), "--model", "small", "--model", "large",
            "--judge-model", "judge", "--builder", builder, "--db", str(db),
        ],
    )  # fmt: skip
    assert by_model.exit_code == 0, by_model.output
    assert (
        "picked #1" in by_model.output and "Paris, says large, is the capital." in by_model.output
    )
    assert "the bigger model" in by_model.output and "agentsm show" in by_model.output
    by_answer = runner.invoke(
        cli,
        [
            "best-of", run_id, "--at", str(at),
            "--answer", "Paris is the capital city of France.",
            "--answer", "Paris is the French capital.",
            "--judge", f"{tmp_path / 'myagent.py'}:shortest", "--json", "--db", str(db),
        ],
    )  # fmt: skip
    assert by_answer.exit_code == 0, by_answer.output
    data = json.loads(by_answer.output)
    assert (
        data["pick"] == 1
        and data["answer"] == "Paris is the French capital."
        and len(data["candidates"]) == 2
    )
    assert data["judge"].endswith(".shortest") and data["candidates"][1]["status"] == "done"
    assert load_best_of(db, data["judgement_id"]).pick == 1
    tree = runner.invoke(cli, ["runs", "--tree", "--db", str(db)])
    assert tree.exit_code == 0, tree.output
    lines = tree.output.splitlines()
    picked = [line for line in lines if "★" in line]
    assert len(picked) == 2 and all("└" in line for line in picked)
    assert sum("best of 2: picked" in line for line in lines) == 2
    show = runner.invoke(cli, ["show", run_id, "--db", str(db)])
    assert show.exit_code == 0 and "best of 2 at seq" in show.output
    assert "★ picked" in show.output
    shown = runner.invoke(cli, ["show", data["judgement_id"], "--db", str(db)])
    assert "CandidatePicked" in shown.output and "best-of judgement of 2 branches" in shown.output
    replayed = runner.invoke(cli, ["replay", "--all", "--db", str(db)])
    assert replayed.exit_code == 0, replayed.output
    assert "7 runs replayed: 7 identical" in replayed.output
    missing = runner.invoke(cli, ["best-of", run_id, "--at", str(at), "--db", str(db)])
    assert missing.exit_code != 0 and "needs candidates" in str(missing.exception)
    assert "once per candidate" in str(missing.exception)
    assert main(["best-of", run_id, "--at", str(at), "--answer", "x", "--db", str(db)]) == 2
    assert "needs one judge" in capsys.readouterr().err


def test_best_of_reprs(tmp_path: Path) -> None:
    assert repr(Variant(model="m", label="x")) == "Variant(label='x', model='m')"
    assert repr(LlmJudge(MockLlmCaller([]), model="j")) == "LlmJudge(MockLlmCaller, model='j')"
    c = Candidate(index=0, run_id="r1", status="done", answer="Paris")
    assert repr(c) == "Candidate(0, 'r1', label='', status='done', answer='Paris')"
    result = BestOf("j1", "p", 5, TASK, (c,), "function m.f", pick=0)
    assert repr(result).startswith("BestOf(judgement='j1', parent='p' at seq 5")


class DyingJudge:
    """An LLM judge whose process dies while it is asked (as a kill would)."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        import os

        os._exit(9)


def judge_killed(db: Path) -> None:  # run in a subprocess by the test below
    run_id, at = record_parent(db)
    variants = [Variant(answer="Paris, on the Seine."), Variant(answer="Paris, I believe it is.")]
    best_of(db, run_id, at, variants, LlmJudge(DyingJudge(), model="judge"))


def test_a_judgement_killed_while_the_judge_was_asked_replays_up_to_where_it_stopped(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    db = tmp_path / "runs.db"
    script = "import sys; from tests.test_best_of import judge_killed; judge_killed(sys.argv[1])"
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", script, str(db)], cwd=root, capture_output=True)
    assert done.returncode == 9, done.stderr.decode()
    store = SQLiteEventStore(db)
    [judgement] = [r.run_id for r in store.runs() if r.info.get("judgement")]
    assert isinstance(Trace.load(store, judgement).facts()[-1], f.JudgeAsked)  # then it died
    report = replay_run(store, judgement)
    assert report.identical, str(report)  # the recording says nothing past its end
