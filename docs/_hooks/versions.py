"""MkDocs hook: the numbers a page would otherwise copy by hand, read from the code it documents.

A page writes `{{ package_version }}` or a marker such as `<!-- generated: fact-versions -->`;
the hook puts the value or the table there while the site is built, so the site and the
release it documents never disagree. Nothing is fetched: the values come from the checkout.
"""

from __future__ import annotations

import ast
import re
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _migrations(path: str) -> list[tuple[int, str]]:
    """The `(version, name, ...)` rows of a module's MIGRATIONS list, read without importing
    it (PostgreSQL's needs psycopg, which building the site does not)."""
    tree = ast.parse((ROOT / path).read_text())
    for node in ast.walk(tree):
        target = getattr(node, "target", None) or next(iter(getattr(node, "targets", [])), None)
        if (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and getattr(target, "id", "") == "MIGRATIONS"
        ):
            assert node.value is not None
            rows = []
            for row in node.value.elts:  # type: ignore[attr-defined]
                rows.append((row.elts[0].value, row.elts[1].value))
            return rows
    raise LookupError(f"no MIGRATIONS list in {path}")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def package_version() -> str:
    tree = ast.parse((ROOT / "agentsm" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__version__":
            return str(node.value.value)  # type: ignore[attr-defined]
    raise LookupError("agentsm/__init__.py sets no __version__")


def migrations_table(path: str) -> str:
    rows = _migrations(path)
    return _table(["version", "migration"], [[v, name] for v, name in rows])


def latest(path: str) -> str:
    return str(_migrations(path)[-1][0])


def fact_versions() -> str:
    from agentsm.facts import FACTS

    rows = []
    for kind in sorted(FACTS.versions):
        version = FACTS.versions[kind]
        older = sorted(v for (k, v) in FACTS.upcasters if k == kind)
        reads = ", ".join(str(v) for v in [*older, version])
        rows.append([f"`{kind}`", version, reads])
    return _table(["fact", "written at version", "read at versions"], rows)


def sqlite_tables() -> str:
    """The tables and columns of a log made by this release (FTS5's own tables left out)."""
    from eventstore import SQLiteEventStore

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.db"
        SQLiteEventStore(path).close()
        db = sqlite3.connect(path)
        try:
            names = [
                n
                for (n,) in db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
                if not re.fullmatch(r"events_words_(config|data|docsize|idx|content)", n)
            ]
            rows = []
            for name in names:
                columns = [r[1] for r in db.execute(f"PRAGMA table_info({name})")]
                rows.append([f"`{name}`", ", ".join(f"`{c}`" for c in columns)])
        finally:
            db.close()
    return _table(["table", "columns"], rows)


GENERATED = {
    "sqlite-migrations": lambda: migrations_table("eventstore/migrations.py"),
    "postgres-migrations": lambda: migrations_table("eventstore/pg_schema.py"),
    "fact-versions": fact_versions,
    "sqlite-tables": sqlite_tables,
}
VALUES = {
    "package_version": package_version,
    "sqlite_schema_version": lambda: latest("eventstore/migrations.py"),
    "postgres_schema_version": lambda: latest("eventstore/pg_schema.py"),
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        return GENERATED[match.group(1)]()

    def value(match: re.Match[str]) -> str:
        make = VALUES.get(match.group(1))
        return make() if make else match.group(0)

    markdown = re.sub(r"<!-- generated: ([a-z-]+) -->", generated, markdown)
    return re.sub(r"\{\{ ([a-z_]+) \}\}", value, markdown)
