"""Full-text search in a PostgreSQL log: the words of each fact (`eventstore.fulltext`, the
same as SQLite's) in `events_words` as a `tsvector` with a GIN index, written by the searches
of a store that may write, for the facts an insert trigger lists in `events_unindexed`."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import psycopg

from . import fulltext
from .errors import StoreError
from .pg_connections import Conn, Connections

__all__ = ["Search"]

log = logging.getLogger(__name__)

_TIDY_AFTER = 10_000
"""Facts indexed in one go after which the index's statistics are made again (`_tidy`)."""
_MAY_NOT_WRITE = (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction)
"""What a user who may only read the log meets when a search tries to index it."""


class Search:
    """The full-text search of one store's log (`read_only`: it never indexes)."""

    def __init__(self, db: Connections, *, read_only: bool) -> None:
        self._db = db
        self.read_only = read_only

    def search(
        self, text: str, *, kinds: Sequence[str] | None = None, limit: int = 50
    ) -> list[tuple[str, int, str, str]]:
        """The facts whose text holds every term of `text` (`eventstore.fulltext`: words,
        phrases, `prefix*`), best match (`ts_rank`) first among the last `fulltext.CANDIDATES`
        recorded that match: `(run_id, seq, kind, snippet)`, the snippet the matching text with
        each match in [ ]; only facts of `kinds` when given. A store that may write first
        indexes the facts appended since (`index`); facts not in the index (for a
        read-only store, or in a schema from before it) are read one by one and come after the
        indexed matches."""
        terms = fulltext.parse_query(text)
        if not terms or limit <= 0 or (kinds is not None and not kinds):
            return []
        indexed = self._indexed()
        if indexed and not self.read_only:
            self._index_all()
        rows: list[tuple[str, int, str, str]] = []
        if indexed:
            of_kinds = "AND kind = ANY(%s)" if kinds else ""
            query = (  # the candidates first, then the ranks of those only
                "SELECT b.run_id, b.seq, b.kind, e.payload FROM (SELECT run_id, seq, kind, "
                "recorded_at, ts_rank(words, CAST(%s AS tsquery)) AS rank FROM (SELECT run_id, "
                "seq, kind, recorded_at, words FROM events_words "
                f"WHERE words @@ CAST(%s AS tsquery) {of_kinds} "
                "ORDER BY recorded_at DESC, run_id DESC, seq DESC LIMIT %s) AS c "
                "ORDER BY rank DESC, recorded_at DESC, run_id DESC, seq DESC LIMIT %s) AS b "
                "JOIN events e USING (run_id, seq) "
                "ORDER BY b.rank DESC, b.recorded_at DESC, b.run_id DESC, b.seq DESC"
            )
            tsquery = fulltext.tsquery(terms)
            args = [tsquery, tsquery, *([list(kinds)] if kinds else [])]
            rows = [tuple(r) for r in self._db.rows(query, [*args, fulltext.CANDIDATES, limit])]
        if len(rows) < limit:
            pages = self._unindexed_pages(indexed, kinds)
            rows += fulltext.scan(pages, terms, limit - len(rows))
        return [(r, s, k, fulltext.snippet(fulltext.fact_text(p), terms)) for r, s, k, p in rows]

    def _indexed(self) -> bool:
        """Whether the schema has the index of the facts' words (a reader may open an older
        one)."""
        return bool(self._db.rows("SELECT to_regclass('events_words') IS NOT NULL")[0][0])

    def _unindexed_pages(
        self, indexed: bool, kinds: Sequence[str] | None, size: int = 2000
    ) -> Iterator[list[tuple[str, int, str, str]]]:
        """The facts not in the index (every fact of a schema without one), of `kinds`, a page
        at a time in (run, seq) order."""
        source = "events_unindexed u JOIN events e USING (run_id, seq)" if indexed else "events e"
        where = " AND e.kind = ANY(%s)" if kinds is not None else ""
        after: tuple[str, int] = ("", 0)
        while True:
            page = self._db.rows(
                f"SELECT e.run_id, e.seq, e.kind, e.payload FROM {source} "
                f"WHERE (e.run_id, e.seq) > (%s, %s){where} ORDER BY e.run_id, e.seq LIMIT %s",
                [*after, *([list(kinds)] if kinds is not None else []), size],
            )
            if not page:
                return
            after = (page[-1][0], page[-1][1])
            yield [(r[0], r[1], r[2], r[3]) for r in page]

    def index(self, *, batch: int = 5000) -> int:
        """Write the words (`eventstore.fulltext`) of the facts appended since the last call
        into the full-text index; returns how many facts were indexed. Words are made outside
        the write transactions, `batch` facts at a time; two stores indexing at once write
        each fact once. A store that may not write (read-only, or a user without the right)
        indexes nothing: its searches read those facts one by one."""
        if self.read_only or not self._indexed():
            return 0
        return self._index_all(batch)

    def _index_all(self, batch: int = 5000) -> int:
        """Index every fact listed as not indexed, `batch` at a time; how many."""
        added = 0
        after: tuple[str, int] | None = ("", 0)
        while after is not None:
            try:
                after, indexed = self._index_next(after, batch)
            except StoreError as e:
                if isinstance(e.__cause__, _MAY_NOT_WRITE):
                    return added
                raise
            added += indexed
        if added >= _TIDY_AFTER and not self._db.in_batch():
            self._tidy()
        return added

    def _tidy(self) -> None:
        """After indexing many facts at once (a log searched for the first time): statistics
        of the index, so that the planner reads a common word newest first, and the emptied
        queue vacuumed, so that reading it does not walk past its deleted rows. Autovacuum
        would do both, minutes later."""
        for statement in (b"ANALYZE events_words", b"VACUUM events_unindexed"):
            try:
                self._db.execute("tidy the search index", statement, ())
            except StoreError as e:
                log.info("%s (the search index works without it)", e)

    def _index_next(self, after: tuple[str, int], batch: int) -> tuple[tuple[str, int] | None, int]:
        """Index the next `batch` facts not indexed after the (run, seq) `after`: where the
        next batch starts (None when there is none) and how many were indexed."""
        page = self._db.rows(
            "SELECT u.run_id, u.seq, e.kind, e.payload, e.recorded_at FROM events_unindexed u "
            "JOIN events e USING (run_id, seq) WHERE (u.run_id, u.seq) > (%s, %s) "
            "ORDER BY u.run_id, u.seq LIMIT %s",
            [*after, batch],
        )
        if not page:
            return None, 0
        vectors = [fulltext.tsvector(fulltext.words(fulltext.fact_text(r[3]))) for r in page]
        kept = [(r, v) for r, v in zip(page, vectors, strict=True) if v]
        words = (
            [r[0] for r, _ in kept],
            [r[1] for r, _ in kept],
            [r[2] for r, _ in kept],
            [r[4] for r, _ in kept],
            [v for _, v in kept],
        )
        keys = ([r[0] for r in page], [r[1] for r in page])

        def write(conn: Conn) -> None:
            conn.execute(
                b"INSERT INTO events_words (run_id, seq, kind, recorded_at, words) SELECT * "
                b"FROM unnest(%s::text[], %s::integer[], %s::text[], "
                b"%s::double precision[], %s::tsvector[]) "
                b"ON CONFLICT DO NOTHING",
                words,
            )
            conn.execute(
                b"DELETE FROM events_unindexed WHERE (run_id, seq) IN "
                b"(SELECT * FROM unnest(%s::text[], %s::integer[]))",
                keys,
            )

        self._db.transact("bring the search index up to date", write)
        return (page[-1][0], page[-1][1]), len(page)

    def unindexed(self) -> int:
        """How many facts the full-text index does not hold yet (appended since the last
        search by a store that could write, or logged before the index)."""
        table = "events_unindexed" if self._indexed() else "events"
        return int(self._db.rows(f"SELECT count(*) FROM {table}")[0][0])
