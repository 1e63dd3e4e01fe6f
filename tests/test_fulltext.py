"""Full-text search, the same on every backend (`eventstore.fulltext`): the text of the facts,
not their JSON; words split alike on SQLite and PostgreSQL (an e-mail address, a URL, a
hyphenated word); phrases and prefixes; snippets of plain text with the match marked; the task
filter ignoring the case of every letter; a log of the previous schema migrated and searchable,
and searched as it is when opened read-only."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import EventStore, NewEvent, Searchable, SQLiteEventStore, migrations, pg_schema
from eventstore.fulltext import (
    MAX_WORDS,
    Term,
    _spans,
    fact_text,
    matches,
    parse_query,
    snippet,
    tsvector,
    words,
)

from .backends import Backend

LEGACY = Path(__file__).parent / "fixtures" / "legacy"


def say(kind: str, text: str, **more: Any) -> NewEvent:
    return NewEvent(kind, json.dumps({"text": text, **more}), "{}", 1.0)


FACTS = {
    "paris": [
        say("Asked", "What is the capital of France?\nInhabitants: how many live there?"),
        say("Said", "Paris has about 2,102,650 inhabitants (2023).", success=True),
    ],
    "mail": [
        say("Asked", "Write to Bob@Example.COM about the well-known issue"),
        say("Said", "See https://docs.example.org/guide/rate-limits?page=2 first.\nDone."),
    ],
    "other": [
        say("Asked", "An inhabited island, bob example com"),
        say("Said", "Ärger mit der Straße: «Größe» 42"),
    ],
}


@pytest.fixture
def logged(store: EventStore) -> Any:
    """A store holding the runs of FACTS."""
    if not isinstance(store, Searchable):
        pytest.skip(f"{type(store).__name__} has no search")
    for run_id, events in FACTS.items():
        store.create_run(run_id, f"task {run_id}", events=events)
    return store


def found(store: Any, text: str, **kw: Any) -> list[tuple[str, int]]:
    return sorted((h[0], h[1]) for h in store.search(text, **kw))


# -- the words: one tokenizer for both backends ----------------------------------------------


def test_the_text_of_a_fact_is_its_string_values_not_its_json() -> None:
    payload = json.dumps({"a": "one\ntwo", "n": 3, "ok": True, "b": [{"c": "caf\u00e9"}, None]})
    assert fact_text(payload) == "one\ntwo\ncafé"
    assert words(fact_text(payload)) == ["one", "two", "cafe"]  # not "ntwo", not "u00e9"
    assert fact_text("not json") == "not json"


def test_words_fold_case_and_accents_and_split_on_all_else() -> None:
    text = "Bob@Example.COM https://x.org/a-b_c?q=1 well-known Ärger STRASSE Straße ﬁne ½ x²"
    assert (
        words(text)
        == (
            "bob example com https x org a b c q 1 well known arger strasse strasse fine 1 2 x2"
        ).split()
    )
    assert words("cafe\u0301 café") == ["cafe", "cafe"]  # decomposed or composed alike


def test_a_fact_indexes_its_first_words_only() -> None:
    many = " ".join(f"w{i}" for i in range(MAX_WORDS + 10))
    assert len(words(many)) == MAX_WORDS and words("a" * 101 + " b") == ["b"]
    vector = tsvector(["a", "b", "a"])
    assert vector == "'a':1,3 'b':2"


def test_a_query_is_words_phrases_and_prefixes() -> None:
    assert parse_query('Bob@Example.com inhab* "capital of" - " ') == [
        Term(("bob", "example", "com")),
        Term(("inhab",), prefix=True),
        Term(("capital", "of")),
    ]
    text = words("The capital of France; inhabitants: many")
    assert matches(parse_query("inhab* capital"), text) == 2
    assert matches(parse_query('"of capital"'), text) == 0
    assert matches(parse_query("inhab"), text) == 0


def test_a_snippet_is_the_text_around_the_match_with_the_match_marked() -> None:
    text = (
        "One two three four five six\nseven eight: write to Bob@Example.COM, or Bob now, and so on."
    )
    assert snippet(text, parse_query("bob@example.com"), width=8) == (
        "…write to [Bob@Example.COM], or Bob now…"
    )
    assert snippet(text, parse_query("seven eig*"), width=4) == "…six [seven] [eight]: write…"
    assert snippet("a\n\nb", parse_query("b")) == "a [b]"


# -- on every backend -----------------------------------------------------------------------


def test_a_word_at_the_start_of_a_later_line_is_found(logged: Any) -> None:
    assert found(logged, "inhabitants") == [("paris", 1), ("paris", 2)]
    assert found(logged, "done") == [("mail", 2)]
    assert found(logged, "ninhabitants") == [] and found(logged, "u00e4rger") == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("bob@example.com", [("mail", 1), ("other", 1)]),  # the same words in a row
        ("BOB@EXAMPLE.COM example", [("mail", 1), ("other", 1)]),
        ("https://docs.example.org/guide/rate-limits", [("mail", 2)]),
        ("docs.example.org", [("mail", 2)]),
        ("rate-limits", [("mail", 2)]),
        ("limits", [("mail", 2)]),
        ("well-known", [("mail", 1)]),
        ("known", [("mail", 1)]),
        ("well", [("mail", 1)]),
        ('"example com"', [("mail", 1), ("other", 1)]),
        ('"com example"', []),
        ("2,102,650", [("paris", 2)]),
        ("102", [("paris", 2)]),
        ("arger strasse GROSSE", [("other", 2)]),
        ("ärger", [("other", 2)]),
    ],
)
def test_addresses_urls_and_hyphenated_words_are_found_alike_on_every_backend(
    logged: Any, query: str, expected: list[tuple[str, int]]
) -> None:
    assert found(logged, query) == expected


def test_a_prefix_finds_every_word_that_starts_with_it(logged: Any) -> None:
    assert found(logged, "inhab*") == [("other", 1), ("paris", 1), ("paris", 2)]
    assert found(logged, "inhab") == []
    assert found(logged, "inhabi* live") == [("paris", 1)]
    assert found(logged, "bob@exam*") == [("mail", 1), ("other", 1)]
    assert found(logged, "inhab*", kinds=["Said"]) == [("paris", 2)]


def test_the_snippet_is_plain_text_with_the_match_marked(logged: Any) -> None:
    hits = {(h[0], h[1]): h[3] for h in logged.search("inhabitants")}
    assert hits == {
        ("paris", 1): "What is the capital of France? [Inhabitants]: how many live there?",
        ("paris", 2): "Paris has about 2,102,650 [inhabitants] (2023).",
    }
    assert sorted(logged.search("bob@example.com", kinds=["Asked"])) == [
        ("mail", 1, "Asked", "Write to [Bob@Example.COM] about the well-known issue"),
        ("other", 1, "Asked", "An inhabited island, [bob] [example] [com]"),
    ]
    [url] = logged.search("rate-lim*")
    assert url[3] == "See https://docs.example.org/guide/[rate-limits]?page=2 first. Done."


def test_the_task_filter_ignores_the_case_of_every_letter(store: EventStore) -> None:
    for run_id, task in (("de", "Ärger mit der Öffnung"), ("el", "Σοφία"), ("ru", "ПРИВЕТ мир")):
        store.create_run(run_id, task)
    for text, expected in (
        ("ärger", ["de"]),
        ("ÖFFNUNG", ["de"]),
        ("äRGER MIT", ["de"]),
        ("σοφία", ["el"]),
        ("ΣΟΦΊΑ", ["el"]),
        ("привет", ["ru"]),
        ("МИР", ["ru"]),
        ("arger", []),
    ):
        assert [r.run_id for r in store.runs(task=text)] == expected, text


def test_a_read_only_store_reads_the_facts_not_indexed_yet(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("a second store does not see a log in memory")
    writer: Any = backend.open()
    writer.create_run("r", "t", events=[say("Said", "first zebra")])
    assert found(writer, "zebra") == [("r", 1)] and writer.unindexed() == 0
    writer.append("r", 1, [say("Said", "one more line\nzebra again")])
    reader: Any = backend.open(read_only=True)
    assert reader.unindexed() == 1 and reader.index_for_search() == 0
    assert found(reader, "zebra") == [("r", 1), ("r", 2)]  # the second one read as it is
    assert [h[3] for h in reader.search("again")] == ["one more line zebra [again]"]
    assert found(writer, "zebra again") == [("r", 2)] and reader.unindexed() == 0
    assert writer.index_for_search() == 0  # each fact is indexed once


def test_stores_indexing_at_once_index_each_fact_once(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("a second store does not see a log in memory")
    first: Any = backend.open()
    second: Any = backend.open()
    first.create_run("r", "t", events=[say("Said", f"word{i} common") for i in range(300)])
    counts: list[int] = []
    threads = [
        threading.Thread(target=lambda s=s: counts.append(s.index_for_search(batch=7)))
        for s in (first, second)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) >= 300 and first.unindexed() == second.unindexed() == 0
    hits = first.search("common", limit=1000)
    assert len(hits) == len({(h[0], h[1]) for h in hits}) == 300


def _text_search(steps: list[Any]) -> int:
    """The version that brought the search over the facts' text."""
    return int(next(version for version, name, _ in steps if name == "fact text search"))


def _previous_schema(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A store on a log made by the previous schema version (its JSON index filled on SQLite,
    as the last release's search left it), its facts recorded by this store."""
    for module in (migrations, pg_schema):  # the migrations before the text search's
        kept = [m for m in module.MIGRATIONS if m[0] < _text_search(module.MIGRATIONS)]
        monkeypatch.setattr(module, "MIGRATIONS", kept)
    old: Any = backend.open()
    for run_id, events in FACTS.items():
        old.create_run(run_id, f"task {run_id}", events=events)
    if backend.name == "sqlite-file":
        backend.execute("INSERT INTO events_fts (rowid, payload) SELECT rowid, payload FROM events")
        backend.execute("UPDATE events_indexed SET upto = (SELECT MAX(rowid) FROM events)")
    monkeypatch.undo()
    return old


def test_a_log_of_the_previous_schema_is_migrated_and_searchable(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not backend.shared:
        pytest.skip("a log in memory is not opened again")
    _previous_schema(backend, monkeypatch)
    reader: Any = backend.open(read_only=True)  # an old log as it is: read one fact at a time
    assert reader.unindexed() == 6 and found(reader, "inhabitants") == [("paris", 1), ("paris", 2)]
    assert found(reader, "rate-limits") == [("mail", 2)]
    store: Any = backend.open()  # migrates it
    assert store.unindexed() == 6  # every fact logged before waits for the next search
    assert found(store, "inhabitants") == [("paris", 1), ("paris", 2)]
    assert store.unindexed() == 0 and reader.unindexed() == 0
    assert found(store, "bob@example.com") == [("mail", 1), ("other", 1)]
    store.append("paris", 2, [say("Said", "Noted.\nInhabitants counted")])
    assert found(store, "inhabitants counted") == [("paris", 3)]


def test_the_oldest_legacy_log_is_migrated_and_its_lines_searchable(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY / "legacy-0.1.0.db", db)
    with SQLiteEventStore(db, read_only=True) as reader:  # version 1: no index at all
        assert reader.search("careful", kinds=["RunStarted"])  # "You are careful." on a line
    with SQLiteEventStore(db, create=False) as store:
        hits = store.search("careful", kinds=["RunStarted"])
        assert hits and all("You are [careful]." in h[3] for h in hits)
        assert store.unindexed() == 0


TEXT = st.text(
    alphabet=st.sampled_from(list("abcXYZ019 \n\t.,-_@/:'\"*()") + list("äÄßéﬁ½Σςи日")),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(text=TEXT, data=st.data())
def test_every_word_of_a_fact_finds_it_whole_or_as_a_prefix(text: str, data: st.DataObject) -> None:
    found = words(text)
    if text.isascii():
        assert found == [w for _, _, w in _spans(text)]  # the fast path splits alike
    if not found:
        return
    word = data.draw(st.sampled_from(found))
    cut = data.draw(st.integers(1, len(word)))
    with SQLiteEventStore(":memory:") as store:
        store.create_run("r", "t", events=[say("Said", text)])
        for query in (word, word[:cut] + "*", text):
            hits = store.search(query)
            assert [(h[0], h[1]) for h in hits] == [("r", 1)], query
            assert matches(parse_query(query), found) > 0
            assert "[" in hits[0][3] and "\n" not in hits[0][3]


def test_the_command_indexes_a_log_it_may_write_on_either_backend(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from eventstore import open_store
    from replay.cli import main

    store: Any = open_store(db_url)
    store.create_run("r", "t", events=[say("RunStarted", "Ask Bob@Example.COM\nInhabitants?")])
    assert store.unindexed() == 1
    assert main(["search", "inhab*", "--db", db_url]) == 0
    out, err = capsys.readouterr()
    assert "Ask Bob@Example.COM [Inhabitants]?" in out and "not in its search index" not in err
    assert store.unindexed() == 0
    store.close()
