"""Full-text search, the same on every backend: the text of a fact, its words, queries over
words, and the snippet shown for a match.

The text of a fact is the string values of its payload (JSON-decoded), one per line: never
the JSON, so a word after a newline or a quote is a word like any other. Its words are the runs
of letters and digits (`str.isalnum`) after Unicode folding (NFKC-compatible decomposition,
case folding, accents dropped): `Bob@Example.COM` is `bob example com`, `café` is `cafe`, a
hyphen or an underscore splits. Both backends index exactly these words, made here once:
SQLite as an FTS5 table over the words joined by spaces (its `ascii` tokenizer splits there
only), PostgreSQL as a `tsvector` written from them (its parser never sees the text).

A query is words that must all occur: a word that folds into several (an email address, a URL,
`well-known`) or a `"quoted phrase"` must occur as those words in a row, and a trailing `*`
makes the last word a prefix (`inhab*`). `matches` evaluates a query in Python (for facts
not indexed yet), `snippet` marks the match in the fact's text.
"""

from __future__ import annotations

import heapq
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CANDIDATES",
    "MAX_WORDS",
    "Term",
    "fact_text",
    "fts5_query",
    "matches",
    "parse_query",
    "scan",
    "snippet",
    "tsquery",
    "tsvector",
    "words",
]

MAX_WORDS = 16383
"""Words indexed per fact (PostgreSQL's largest `tsvector` position); later ones are not."""
MAX_WORD = 100
"""Longer words (encoded blobs) are not indexed."""
MAX_CHARS = 150_000
"""Characters of words indexed per fact, so that a `tsvector` stays under PostgreSQL's 1 MB."""
MAX_POSITIONS = 256
"""Positions PostgreSQL keeps of one word in one fact (phrases past them are not found there)."""
CANDIDATES = 10_000
"""Matches ranked per search: the ones recorded last. A word in most facts of a big log (`the`)
would otherwise have every one of its facts ranked (seconds on a million)."""

_RUN = re.compile(r"[^\W_]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_QUERY = re.compile(r'"([^"]*)"|(\S+)')


def fact_text(payload: str) -> str:
    """The text of a fact: the string values of its JSON payload, in order, one per line (the
    payload itself when it is not JSON)."""
    try:
        value = json.loads(payload)
    except ValueError:
        return payload
    found: list[str] = []
    _strings(value, found)
    return "\n".join(found)


def _strings(value: Any, found: list[str]) -> None:
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _strings(item, found)


def _fold(run: str) -> list[str]:
    """The words of one run of letters and digits: lowercased (ASCII), or case folded with
    compatibility forms decomposed and accents dropped (which may split it: `½` is `1 2`)."""
    if run.isascii():
        return [run.lower()]
    folded = unicodedata.normalize("NFKD", run.casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return _RUN.findall(unicodedata.normalize("NFC", folded))


def _spans(text: str) -> Iterator[tuple[int, int, str]]:
    """Every word of `text` (composed, NFC) with the span of the run it comes from."""
    for found in _RUN.finditer(text):
        for word in _fold(found.group()):
            yield found.start(), found.end(), word


def _composed(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _capped(found: Iterable[str]) -> Iterator[str]:
    """The words that are indexed: none longer than MAX_WORD, at most MAX_WORDS of them and
    MAX_CHARS characters in all."""
    count = chars = 0
    for word in found:
        if len(word) > MAX_WORD:
            continue
        count += 1
        chars += len(word)
        if count > MAX_WORDS or chars > MAX_CHARS:
            return
        yield word


def words(text: str) -> list[str]:
    """The indexed words of `text`, in order (see the module's docstring)."""
    if text.isascii():
        found = _RUN.findall(text.lower())
        if len(found) <= MAX_WORDS and all(len(w) <= MAX_WORD for w in found):
            if sum(map(len, found)) <= MAX_CHARS:
                return found
        return list(_capped(found))
    return list(_capped(w for _, _, w in _spans(_composed(text))))


@dataclass(frozen=True)
class Term:
    """One thing a query asks for: these words in a row, the last one a prefix if `prefix`."""

    words: tuple[str, ...]
    prefix: bool = False

    def at(self, found: Sequence[str], i: int) -> bool:
        """Whether the term occurs in `found` starting at word `i`."""
        last = len(self.words) - 1
        if i + last >= len(found):
            return False
        for j, word in enumerate(self.words):
            have = found[i + j]
            if have != word and not (self.prefix and j == last and have.startswith(word)):
                return False
        return True


def parse_query(text: str) -> list[Term]:
    """The terms of a query: each word or `"quoted phrase"`, with `*` at its end a prefix.
    Punctuation alone asks for nothing; no terms at all means no match."""
    terms: list[Term] = []
    for quoted, bare in _QUERY.findall(text):
        part = quoted or bare
        found = tuple(w for _, _, w in _spans(_composed(part)))
        if found:
            terms.append(Term(found, part.rstrip().endswith("*")))
    return terms


def matches(terms: Sequence[Term], found: Sequence[str]) -> int:
    """How many times the terms occur in the words `found` (0 unless every one does)."""
    total = 0
    for term in terms:
        count = sum(1 for i in range(len(found)) if term.at(found, i))
        if not count:
            return 0
        total += count
    return total


def scan(
    pages: Iterable[Sequence[tuple[str, int, str, str]]], terms: Sequence[Term], limit: int
) -> list[tuple[str, int, str, str]]:
    """The facts among `pages` of `(run_id, seq, kind, payload)` rows that match, the most
    occurrences first (then in the order read), at most `limit`: the search of the facts an
    index does not hold."""
    found = (
        (-count, order, row)
        for order, row in enumerate(row for page in pages for row in page)
        if (count := matches(terms, words(fact_text(row[3]))))
    )
    return [row for _, _, row in heapq.nsmallest(limit, found)]


def fts5_query(terms: Sequence[Term]) -> str:
    """The terms as an FTS5 query over the indexed words: phrases, ANDed."""
    return " ".join(
        '"' + " ".join(t.words).replace('"', '""') + '"' + ("*" if t.prefix else "") for t in terms
    )


def _lexeme(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery(terms: Sequence[Term]) -> str:
    """The terms as a PostgreSQL `tsquery` literal: phrases (`<->`), ANDed."""
    phrases = []
    for t in terms:
        lexemes = [_lexeme(w) for w in t.words]
        if t.prefix:
            lexemes[-1] += ":*"
        phrases.append("(" + " <-> ".join(lexemes) + ")")
    return " & ".join(phrases)


def tsvector(found: Sequence[str]) -> str:
    """The words as a PostgreSQL `tsvector` literal, with their positions (1, 2, ...). Words
    are letters and digits: nothing in them needs quoting."""
    positions: dict[str, list[int]] = {}
    for i, word in enumerate(found, 1):
        at = positions.get(word)
        if at is None:
            positions[word] = [i]
        elif len(at) < MAX_POSITIONS:
            at.append(i)
    return " ".join([f"'{w}':{','.join(map(str, at))}" for w, at in positions.items()])


def snippet(text: str, terms: Sequence[Term], *, width: int = 16) -> str:
    """About `width` words of `text` where they show the most terms (the first such place),
    on one line, each match in `[ ]` (words matched in a row with nothing but punctuation
    between them in one pair, as `[bob@example.com]`), `…` where the text was cut."""
    text = _SURROGATE.sub("\ufffd", _composed(text))
    spans = list(_spans(text))
    found = [w for _, _, w in spans]
    if not spans:
        return " ".join(text[: width * 8].split())
    starts = [[i for i in range(len(found)) if term.at(found, i)] for term in terms]
    marked = {
        i + j
        for term, at in zip(terms, starts, strict=True)
        for i in at
        for j in range(len(term.words))
    }

    def window(first: int) -> int:
        return max(0, min(first - width // 4, len(spans) - width))

    def covered(lo: int) -> int:  # how many terms the window from `lo` shows
        return sum(any(lo <= i < lo + width for i in at) for at in starts)

    firsts = sorted({i for at in starts for i in at})[:200]
    lo = max((window(i) for i in firsts), key=covered, default=0)
    hi = min(len(spans), lo + width)
    start = spans[lo][0] if lo else 0
    end = spans[hi - 1][1] if hi < len(spans) else len(text)
    pieces: list[str] = []
    at = start
    i = lo
    while i < hi:
        if i not in marked:
            i += 1
            continue
        begin, stop = spans[i][0], spans[i][1]
        j = i + 1
        while j < hi and j in marked and not _has_space(text[stop : spans[j][0]]):
            stop = max(stop, spans[j][1])
            j += 1
        pieces += [text[at:begin], "[", text[begin:stop], "]"]
        at, i = stop, j
    pieces.append(text[at:end])
    shown = " ".join("".join(pieces).split())
    return ("…" if start else "") + shown + ("…" if end < len(text) else "")


def _has_space(between: str) -> bool:
    return any(c.isspace() for c in between)
