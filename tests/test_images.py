"""Images in runs: a task's and a tool's, stored once per digest beside the log (both backends),
covered by the hash chain through the digest, carried by exports, imports, copies and backups,
checked by verify, and served back offline to replay, branch, resume and a thread's next turn."""

from __future__ import annotations

import base64
import json
import sqlite3
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentMemory,
    BuildError,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    ToolOutcome,
    ToolRegistry,
)
from agentsm import facts as f
from agentsm.images import Image
from agentsm.trace import Trace
from eventstore import NewEvent, SQLiteEventStore, open_store
from eventstore.blobs import Blob, BlobReader, blob_digest, blob_refs
from replay import (
    ExportRefused,
    ImportRefused,
    copy_runs,
    export_run,
    import_runs,
    replay_run,
    resume_run,
)
from replay.branching import branch_run

from .backends import Backend, drop_schema, require_postgres, with_schema

RED = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f00050001ff56c72f0d0000000049454e44ae426082"
)
SCREEN = b"\x89PNG\r\n\x1a\n" + b"the same screenshot, ten times"
ANSWER = "The screen shows the same red square every time."


class Seen(MockLlmCaller):
    """A scripted LLM that keeps what each call was sent (`build_messages`, bytes included)."""

    def __init__(self, script: list[LlmResponse]) -> None:
        super().__init__(script)
        self.sent: list[list[dict[str, Any]]] = []

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        self.sent.append(memory.build_messages())
        return await super().call(memory, tools, model)


def screenshot() -> Image:
    """Take a screenshot."""
    return Image.from_bytes(SCREEN)


def agent(task_image: Path | None, shots: int = 10, llm: Seen | None = None) -> AgentBuilder:
    """Looks at the task's image, takes `shots` screenshots (the same bytes), answers (`llm`
    keeps what it was sent)."""
    images = [task_image] if task_image is not None else None
    script = [*(LlmResponse.tool_call("screenshot") for _ in range(shots))]
    script.append(LlmResponse.final_answer(ANSWER))
    if llm is None:
        llm = Seen([])
    llm._script.extend(script)
    return (
        AgentBuilder("What does the screen show?", images=images)
        .tool(screenshot)
        .llm(llm)
        .config(AgentConfig(max_steps=shots + 2, reflect_every_n_steps=0))
    )


def task_png(tmp_path: Path) -> Path:
    path = tmp_path / "task.png"
    path.write_bytes(RED)
    return path


def blob_rows(store: Any) -> list[tuple[str, str, int]]:
    """(digest, media type, size) of every blob of a store, by digest."""
    if isinstance(store, SQLiteEventStore):
        rows = store._rows("SELECT digest, media_type, size FROM blobs ORDER BY digest")
    else:
        rows = store._db.rows("SELECT digest, media_type, size FROM blobs ORDER BY digest")
    return [tuple(r) for r in rows]


# -- the Image type -----------------------------------------------------------------------


def test_an_image_is_its_media_type_and_a_digest_or_a_url(tmp_path: Path) -> None:
    made = Image.from_bytes(RED)
    assert made.media_type == "image/png" and made.digest == blob_digest(RED)
    assert made.data == RED and made.url is None
    assert made.model_dump() == {"media_type": "image/png", "digest": blob_digest(RED)}
    back = Image.model_validate_json(made.model_dump_json())
    assert back == made and back.data is None  # the bytes are the store's, not the JSON's
    data_url = "data:image/png;base64," + base64.b64encode(RED).decode()
    assert Image.from_url(data_url) == made and Image.of(RED) == made
    assert Image.of(task_png(tmp_path)) == made == Image.of(str(tmp_path / "task.png"))
    url = Image.of("https://example.com/cat.jpg")
    assert url.model_dump() == {"media_type": "image/jpeg", "url": "https://example.com/cat.jpg"}
    assert "sha256:" in repr(made) and "cat.jpg" in repr(url)
    with pytest.raises(ValueError, match="media_type"):
        Image.from_bytes(b"not an image")
    with pytest.raises(ValueError, match="not both"):
        Image(media_type="image/png")
    with pytest.raises(BuildError, match="cannot be read"):
        AgentBuilder("t", images=[tmp_path / "missing.png"]).llm(MockLlmCaller([])).build()
    with pytest.raises(BuildError, match="not int"):
        AgentBuilder("t", images=[3])  # type: ignore[list-item]


def test_a_fact_refers_to_a_blob_by_digest_in_its_json() -> None:
    image = Image.from_bytes(RED)
    payload = json.dumps({"images": [image.model_dump()], "note": '"digest":"sha256:' + "0" * 64})
    assert blob_refs(payload) == [image.digest]  # a string holding the text is no reference
    assert Blob.of(RED, "image/png").intact and Blob(image.digest or "", "", b"x").intact is False


# -- recorded once per digest, in the same transaction as the fact ---------------------------


def test_a_run_that_sends_the_same_screenshot_ten_times_stores_it_once(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    llm = Seen([])
    engine = agent(task_png(tmp_path), llm=llm).store(store).build()
    assert engine.run() == ANSWER
    assert blob_rows(store) == sorted(
        [(blob_digest(RED), "image/png", len(RED)), (blob_digest(SCREEN), "image/png", len(SCREEN))]
    )
    facts = [e.fact for e in Trace.load(store, engine.run_id)]
    shots = [x for x in facts if isinstance(x, f.ToolExecuted)]
    assert len(shots) == 10 and all(x.images == (Image.from_bytes(SCREEN),) for x in shots)
    assert shots[0].observation == "SUCCESS: [image image/png]"
    started = facts[0]
    assert isinstance(started, f.RunStarted) and started.images == (Image.from_bytes(RED),)
    assert store.verify(engine.run_id).ok
    # the LLM was sent the task's image and each screenshot, with their bytes
    last = llm.sent[-1]
    assert last[0]["images"] == [
        {"media_type": "image/png", "digest": blob_digest(RED), "data": RED}
    ]
    tools = [m for m in last if m["role"] == "tool"]
    assert len(tools) == 10 and all(m["images"][0]["data"] == SCREEN for m in tools)
    # the first fact that refers to each blob carried it into the store: the run's first
    # fact the task's image, the first ToolExecuted the screenshot (and no later one)
    with pytest.raises(Exception, match="append-only"):
        backend.execute("UPDATE blobs SET media_type = 'image/gif'")
    with pytest.raises(Exception, match="append-only"):
        backend.execute("DELETE FROM blobs")


def test_the_store_writes_the_blobs_an_event_carries_with_it(backend: Backend) -> None:
    store = backend.open()
    image = Image.from_bytes(RED)
    payload = json.dumps({"images": [image.model_dump()]})
    blob = image.blob()
    assert blob is not None
    event = NewEvent("Shown", payload, "{}", 1.0, blobs=(blob,))
    store.create_run("r1", "t", events=[event])
    store.create_run("r2", "t", events=[event], claim=True)
    store.append("r2", 1, [event, NewEvent("Plain", "{}", "{}", 2.0)])  # stored already: kept
    assert blob_rows(store) == [(image.digest, "image/png", len(RED))]
    assert isinstance(store, BlobReader)
    assert store.blobs([image.digest or "", blob_digest(b"other")]) == {image.digest: blob}
    assert store.verify("r2").ok


def test_runs_without_images_are_written_as_before(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = agent(None, shots=0).store(db).build()
    engine.run()
    with closing(SQLiteEventStore(db)) as store:
        payloads = [e.payload for e in store.read(engine.run_id)]
        assert blob_rows(store) == []
    assert not any('"images"' in p for p in payloads)
    assert replay_run(db, engine.run_id).identical


# -- verify, export, import, copy, backup ---------------------------------------------------


def test_verify_reports_a_blob_whose_bytes_no_longer_match(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    engine = agent(task_png(tmp_path), shots=1).store(store).build()
    engine.run()
    assert store.verify(engine.run_id).ok
    if backend.name == "postgresql":
        backend.execute("ALTER TABLE blobs DISABLE TRIGGER blobs_refuse_change")
    else:
        backend.execute("DROP TRIGGER blobs_refuse_update")
    backend.execute(
        "UPDATE blobs SET bytes = ? WHERE digest = ?", (b"changed", blob_digest(SCREEN))
    )
    report = store.verify(engine.run_id)
    assert not report.ok and report.broken is not None
    assert report.broken.cause == "blob" and report.broken.kind == "ToolExecuted"
    assert "do not match its digest" in str(report)
    with pytest.raises(ExportRefused, match="do not match its digest"):
        list(export_run(store, engine.run_id))


@pytest.fixture
def pg(request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """Makes URLs of new PostgreSQL logs (each in its own schema, dropped afterwards)."""
    server = require_postgres(request)
    schemas: list[str] = []

    def new() -> str:
        schemas.append(f"t_{uuid.uuid4().hex[:16]}")
        return with_schema(server, schemas[-1])

    yield new
    for schema in schemas:
        drop_schema(server, schema)


def make(task: str) -> AgentBuilder:
    """The agent as a replay builds it (no file: the task's image comes from the recording)."""
    return agent(Path("/nonexistent/task.png"))


def test_a_run_with_images_exported_imported_into_postgresql_replays_offline(
    tmp_path: Path, pg: Callable[[], str]
) -> None:
    image, db = task_png(tmp_path), str(tmp_path / "runs.db")
    engine = agent(image).store(db).build()
    engine.run()
    engine.store.close()
    image.unlink()  # the original file is gone
    with closing(open_store(db)) as src:
        lines = list(export_run(src, engine.run_id))
    blobs = [json.loads(line) for line in lines if json.loads(line)["type"] == "blob"]
    assert [b["digest"] for b in blobs] == [blob_digest(RED), blob_digest(SCREEN)]
    assert base64.b64decode(blobs[1]["data"]) == SCREEN
    url = pg()
    with closing(open_store(url)) as dst:
        assert import_runs(dst, lines) == [engine.run_id]
        assert blob_rows(dst) == sorted(
            [(blob_digest(RED), "image/png", len(RED)), (blob_digest(SCREEN), "image/png", 38)]
        )
        assert dst.verify(engine.run_id).ok
        assert import_runs(dst, lines) == [engine.run_id]  # again: nothing changes
    report = replay_run(url, engine.run_id, make)
    assert report.identical, str(report)
    assert replay_run(url, engine.run_id).identical
    # and back into a new SQLite log, by copy
    back = str(tmp_path / "back.db")
    with closing(open_store(url)) as src, closing(open_store(back)) as dst:
        assert copy_runs(src, dst).copied == (engine.run_id,)
        assert len(blob_rows(dst)) == 2 and dst.verify(engine.run_id).ok
    assert replay_run(back, engine.run_id, make).identical


def test_an_import_refuses_a_changed_or_missing_blob(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    engine = agent(task_png(tmp_path), shots=1).store(db).build()
    engine.run()
    with closing(open_store(db)) as src:
        lines = list(export_run(src, engine.run_id))
    blob_at = next(i for i, line in enumerate(lines) if '"type": "blob"' in line)
    changed = json.loads(lines[blob_at]) | {"data": base64.b64encode(b"other").decode()}
    edited = [*lines[:blob_at], json.dumps(changed), *lines[blob_at + 1 :]]
    for bad, found in (
        (edited, "do not match its digest"),
        (lines[:blob_at], "which neither the file nor this database holds"),
        ([*lines, lines[1]], "neither a run nor one of its facts"),  # a fact after the blobs
    ):
        with closing(SQLiteEventStore(tmp_path / f"{uuid.uuid4().hex}.db")) as dst:
            with pytest.raises(ImportRefused, match=found):
                import_runs(dst, bad)
            assert dst.runs() == [] and blob_rows(dst) == []


def test_a_backup_holds_the_blobs(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = agent(task_png(tmp_path), shots=2).store(db).build()
    engine.run()
    with closing(SQLiteEventStore(db)) as store:
        store.backup(tmp_path / "copy.db")
    with closing(SQLiteEventStore(tmp_path / "copy.db")) as copy:
        assert len(blob_rows(copy)) == 2 and copy.verify(engine.run_id).ok


# -- served back offline: replay, branch, resume, a thread's next turn ------------------------


def test_a_branch_going_live_is_sent_the_recorded_images_from_the_store(tmp_path: Path) -> None:
    image, db = task_png(tmp_path), str(tmp_path / "runs.db")
    engine = agent(image, shots=2).store(db).build()
    engine.run()
    engine.store.close()
    image.unlink()
    live = Seen([LlmResponse.final_answer("Branched: the screen shows a red square.")])
    with closing(open_store(db)) as store:
        point = next(e.seq for e in Trace.load(store, engine.run_id) if e.event == "ToolExecuted")
        result = branch_run(store, engine.run_id, at=point + 1, llm=live, builder=make)
        assert result.status == "done", result
    (sent,) = live.sent
    assert sent[0]["images"][0]["data"] == RED  # from the log's blobs: no file
    assert [m["images"][0]["data"] for m in sent if m["role"] == "tool"] == [SCREEN]


def test_a_resumed_run_is_sent_its_images_from_the_store(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    first = agent(task_png(tmp_path), shots=1).require_approval("screenshot")
    engine = first.store(db).build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    engine.store.close()
    (tmp_path / "task.png").unlink()
    later = Seen([LlmResponse.final_answer(ANSWER)])
    done = resume_run(
        db,
        engine.run_id,
        lambda task: (
            make(task).require_approval("screenshot").llm(later).on_approval(lambda r: True)
        ),
    )
    assert done == ANSWER
    (sent,) = later.sent
    assert sent[0]["images"][0]["data"] == RED
    assert [m["images"][0]["data"] for m in sent if m["role"] == "tool"] == [SCREEN]


def test_a_threads_next_turn_is_sent_an_earlier_messages_images(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    llm = Seen(
        [
            LlmResponse.final_answer("A red square, as you sent it."),
            LlmResponse.final_answer(ANSWER),
        ]
    )
    chat = AgentBuilder("-").llm(llm).config(AgentConfig(min_answer_length=1)).store(db).thread()
    chat.send("What is this?", images=[task_png(tmp_path)])
    (tmp_path / "task.png").unlink()
    chat.send("And what colour was it?")
    first, second = llm.sent
    assert first[0] == {
        "role": "user",
        "content": "What is this?",
        "images": [{"media_type": "image/png", "digest": blob_digest(RED), "data": RED}],
    }
    assert second[0] == first[0]  # the earlier message, with its image, from the log's blobs
    said = chat.messages()
    assert said[0]["images"] == [{"media_type": "image/png", "digest": blob_digest(RED)}]
    assert "images" not in said[2]
    with closing(open_store(db)) as store:
        assert len(blob_rows(store)) == 1 and all(store.verify(r).ok for r in chat.runs)
        lines = list(export_run(store, chat.runs[1]))  # the second turn on its own
    assert sum('"type": "blob"' in line for line in lines) == 1


def test_a_redacted_task_keeps_its_image_and_digest(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    builder = agent(task_png(tmp_path), shots=1).store(db)
    engine = builder.redact(r"\bdoes\b", r"[0-9a-f]{64}").build()  # even a hex pattern
    engine.run()
    with closing(open_store(db)) as store:
        assert len(blob_rows(store)) == 2 and store.verify(engine.run_id).ok
    assert engine.definition.task == "What [REDACTED] the screen show?"
    assert engine.definition.images == (Image.from_bytes(RED),)


# -- tools that return images ---------------------------------------------------------------


def test_a_tool_returns_images_in_its_result_or_its_outcome() -> None:
    tools = ToolRegistry()
    tools.register("one", "", {"type": "object"}, lambda a: Image.from_bytes(RED))
    tools.register("mixed", "", {"type": "object"}, lambda a: ["before", Image.from_bytes(RED), 3])
    tools.register(
        "outcome", "", {"type": "object"}, lambda a: ToolOutcome.ok({"n": 1}, images=[RED])
    )
    one, mixed, outcome = (tools.execute(n, {}) for n in ("one", "mixed", "outcome"))
    assert (one.observation, one.images) == ("SUCCESS: [image image/png]", (Image.of(RED),))
    assert mixed.observation == "SUCCESS: before\n[image image/png]\n3"
    assert outcome.observation == 'SUCCESS: {"n": 1}' and outcome.images == (Image.of(RED),)


SERVER = Path(__file__).resolve().with_name("mcp_server.py")


def test_an_mcp_tools_image_content_reaches_the_llm_and_the_log(tmp_path: Path) -> None:
    from .mcp_server import RED_PNG

    db = str(tmp_path / "runs.db")
    llm = Seen([LlmResponse.tool_call("screenshot"), LlmResponse.final_answer(ANSWER)])
    engine = (
        AgentBuilder("What does the screen show?")
        .mcp_server_stdio(
            sys.executable, [str(SERVER)], {"AGENTSM_MCP_VARIANT": "images"}, name="desk"
        )
        .llm(llm)
        .store(db)
        .build()
    )
    assert engine.run() == ANSWER
    picture = bytes.fromhex(RED_PNG)
    (result,) = [m for m in llm.sent[-1] if m["role"] == "tool"]
    assert result["content"] == "SUCCESS: The screen:\n[image image/png]"
    assert result["images"] == [
        {"media_type": "image/png", "digest": blob_digest(picture), "data": picture}
    ]
    with closing(open_store(db)) as store:
        assert blob_rows(store) == [(blob_digest(picture), "image/png", len(picture))]
    report = replay_run(db, engine.run_id)  # the server stopped: its recorded result served
    assert report.identical


# -- the schema -----------------------------------------------------------------------------


def test_the_blob_table_on_both_backends(backend: Backend) -> None:
    store = backend.open()
    if backend.name == "postgresql":
        rows = store._db.rows(  # type: ignore[attr-defined]
            "SELECT column_name, data_type FROM information_schema.columns WHERE "
            "table_schema = current_schema() AND table_name = 'blobs' ORDER BY ordinal_position"
        )
        assert [tuple(r) for r in rows] == [
            ("digest", "text"),
            ("media_type", "text"),
            ("bytes", "bytea"),
            ("size", "integer"),
        ]
    else:
        assert isinstance(store, SQLiteEventStore)
        columns = [(r[1], r[2], r[5]) for r in store._rows("PRAGMA table_info(blobs)")]
        assert columns == [
            ("digest", "TEXT", 1),
            ("media_type", "TEXT", 0),
            ("bytes", "BLOB", 0),
            ("size", "INTEGER", 0),
        ]


def test_a_log_from_before_blobs_is_migrated_and_read_only_opens_read_it(tmp_path: Path) -> None:
    import sqlite_utils

    from eventstore.migrations import migrate

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    migrate(sqlite_utils.Database(conn), 0, upto=8)
    conn.execute("COMMIT")
    conn.close()
    with closing(SQLiteEventStore(path, read_only=True)) as old:
        assert old.blobs([blob_digest(RED)]) == {}
    with closing(SQLiteEventStore(path)) as migrated:
        assert migrated.blobs([blob_digest(RED)]) == {}
        assert "blobs" in migrated._tables()
