"""Judges of best-of-N: a function of the candidates or an LLM, and how what they answer
becomes a pick (or is refused)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentsm import LlmCaller
from agentsm import facts as f
from agentsm.facts import Candidate

from .errors import BestOfError

__all__ = [
    "JUDGE_SYSTEM_PROMPT",
    "FunctionJudge",
    "Judge",
    "LlmJudge",
    "Refusal",
    "Verdict",
    "as_judge",
    "choose",
    "judge_name",
    "judge_prompt",
    "read_answer",
    "verdict_of",
]

JUDGE_SYSTEM_PROMPT = (
    "You judge candidate answers to a task and pick the one that answers it best: correct, "
    "complete and to the point. Reply with one JSON object and nothing else: "
    '{"best": <candidate number>, "scores": {"<candidate number>": <0 to 10>, ...}, '
    '"reason": "<one sentence>"}.'
)
"""What an `LlmJudge` is told, unless it is given its own system prompt."""


@dataclass(frozen=True)
class Verdict:
    """What a function judge returns when an index or a list of scores says too little: the
    pick (a candidate's index), scores by candidate index, and a reason, all optional but one
    of pick and scores."""

    pick: int | None = None
    scores: Sequence[float | None] = ()
    reason: str = ""


FunctionJudge = Callable[[tuple[Candidate, ...]], Any]
"""`judge(candidates)` returning a candidate's index, one score per candidate (the best
finished one wins), or a `Verdict`; it may be async."""


@dataclass(frozen=True)
class LlmJudge:
    """An LLM that judges: it is sent the task and the finished candidates' answers (numbered
    from 1, their index + 1) and answers with the best one's number, scores and a reason."""

    llm: LlmCaller
    model: str = ""
    system_prompt: str = JUDGE_SYSTEM_PROMPT

    def __repr__(self) -> str:
        return f"LlmJudge({type(self.llm).__name__}, model={self.model or '(default)'!r})"


Judge = FunctionJudge | LlmJudge | LlmCaller
"""A function of the candidates, an `LlmJudge`, or any LLM caller (judging as an `LlmJudge`
with its default model)."""


def as_judge(judge: object) -> FunctionJudge | LlmJudge:
    """The judge as given, an LLM caller made an `LlmJudge`; anything else is refused."""
    if isinstance(judge, LlmJudge):
        return judge
    if callable(getattr(judge, "call", None)):
        return LlmJudge(judge)  # type: ignore[arg-type]
    if callable(judge):
        return judge
    raise BestOfError(
        f"judge={judge!r} is not a judge: give a function of the candidates (returning an "
        "index, scores or a Verdict), an LlmJudge(llm, model=...), or an LLM caller."
    )


def judge_name(judge: FunctionJudge | LlmJudge) -> str:
    """How the judgement names its judge: "llm MODEL" or "function module.name"."""
    if isinstance(judge, LlmJudge):
        return f"llm {judge.model or '(default)'}"
    module = getattr(judge, "__module__", None) or ""
    name = getattr(judge, "__qualname__", None) or type(judge).__name__
    return f"function {module}.{name}" if module else f"function {name}"


def judge_prompt(task: str, candidates: Sequence[Candidate]) -> str:
    """The user message an LLM judge gets: the task, then each finished candidate's answer
    under its number (index + 1); candidates that failed are left out, they cannot win."""
    parts = [f"Task:\n{task}"]
    for c in candidates:
        if c.finished:
            label = f" ({c.label})" if c.label else ""
            parts.append(f"Candidate {c.index + 1}{label}:\n{c.answer}")
    numbers = ", ".join(str(c.index + 1) for c in candidates if c.finished)
    parts.append(
        f"Which candidate ({numbers}) answers the task best? Reply with JSON only: "
        '{"best": <number>, "scores": {"<number>": <0 to 10>}, "reason": "<one sentence>"}'
    )
    return "\n\n".join(parts)


class Refusal(Exception):
    """No pick: a code (PickRefused.reason) and a sentence."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


def read_answer(text: str, count: int) -> Verdict:
    """An LLM judge's answer as a verdict (its numbers made indexes): a JSON object with
    "best" (and "scores", "reason"), or a number alone."""
    found = re.search(r"\{.*\}", text, re.DOTALL)
    if found is not None:
        try:
            data = json.loads(found.group(0))
        except ValueError:
            data = None
        if isinstance(data, dict):
            best = next(
                (data[k] for k in ("best", "pick", "choice", "candidate", "winner") if k in data),
                None,
            )
            number = _integer(best)
            scores: list[float | None] = [None] * count
            given = data.get("scores")
            items = given.items() if isinstance(given, dict) else enumerate(given or (), 1)
            for key, value in items if isinstance(given, dict | list) else ():
                n = _integer(key)
                if n is not None and 1 <= n <= count and _number(value) is not None:
                    scores[n - 1] = _number(value)
            reason = data.get("reason")
            return Verdict(
                None if number is None else number - 1,
                tuple(scores) if any(s is not None for s in scores) else (),
                reason if isinstance(reason, str) else "",
            )
    alone = re.fullmatch(r"\s*(?:candidate\s*)?#?(\d+)\s*\.?\s*", text, re.IGNORECASE)
    if alone is not None:
        return Verdict(int(alone.group(1)) - 1)
    raise Refusal(
        "bad_choice",
        f"the judge's answer names no candidate: {text[:200]!r}; it should be JSON such as "
        '{"best": 2, "reason": "..."}',
    )


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("#").isdigit():
        return int(value.strip().lstrip("#"))
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def verdict_of(returned: object, count: int) -> Verdict:
    """What a function judge returned, as a verdict; anything else is refused."""
    if isinstance(returned, Verdict):
        scores = tuple(returned.scores)
    elif isinstance(returned, int) and not isinstance(returned, bool):
        return Verdict(returned)
    elif isinstance(returned, Sequence) and not isinstance(returned, str | bytes):
        scores = tuple(returned)
        returned = Verdict(scores=scores)
    else:
        raise Refusal(
            "bad_choice",
            f"the judge returned {returned!r}: return a candidate's index, one score per "
            "candidate, or a Verdict(pick=..., scores=..., reason=...)",
        )
    if scores and len(scores) != count:
        raise Refusal(
            "bad_choice",
            f"the judge gave {len(scores)} scores for {count} candidates: give one per "
            "candidate (None for a candidate it does not score)",
        )
    bad = [s for s in scores if s is not None and _number(s) is None]
    if bad:
        raise Refusal(
            "bad_choice", f"the judge's scores must be finite numbers (or None), not {bad[0]!r}"
        )
    pick, reason = returned.pick, returned.reason
    if pick is not None and (isinstance(pick, bool) or not isinstance(pick, int)):
        raise Refusal("bad_choice", f"the judge's pick must be a candidate's index, not {pick!r}")
    if not isinstance(reason, str):
        raise Refusal("bad_choice", f"the judge's reason must be text, not {reason!r}")
    return Verdict(pick, tuple(_number(s) for s in scores), reason)


def choose(verdict: Verdict, candidates: Sequence[Candidate]) -> f.CandidatePicked:
    """The pick a verdict makes: its index, else the best-scored finished candidate; a choice
    of a candidate that failed, or of none there is, is refused."""
    pick = verdict.pick
    if pick is None:
        scored = [
            (s, c.index)
            for s, c in zip(verdict.scores, candidates, strict=True)
            if s is not None and c.finished
        ]
        if not scored:
            raise Refusal(
                "bad_choice", "the judge scored no candidate that finished: nothing to pick"
            )
        pick = max(scored, key=lambda sc: (sc[0], -sc[1]))[1]
    if not 0 <= pick < len(candidates):
        raise Refusal(
            "bad_choice",
            f"the judge picked candidate {pick}, and there is none: the candidates are "
            f"0..{len(candidates) - 1} ({_finished(candidates)})",
        )
    chosen = candidates[pick]
    if not chosen.finished:
        raise Refusal(
            "bad_choice",
            f"the judge picked candidate {pick} (run {chosen.run_id}), which did not finish "
            f"({chosen.status}: {chosen.error or 'no answer'}); a judge must pick one that "
            f"did: {_finished(candidates)}",
        )
    return f.CandidatePicked(
        index=pick,
        run_id=chosen.run_id,
        answer=chosen.answer or "",
        label=chosen.label,
        scores=tuple(verdict.scores),
        reason=verdict.reason,
    )


def _finished(candidates: Sequence[Candidate]) -> str:
    done = [str(c.index) for c in candidates if c.finished]
    return f"finished: {', '.join(done)}" if done else "none finished"
