"""History: memory's entries as an immutable sequence that grows without copying what it holds."""

from __future__ import annotations

import copy
import pickle

import pytest

from agentsm import AgentMemory, History, HistoryEntry, ToolCall, apply
from agentsm import facts as f
from agentsm.images import Image


def entry(n: int) -> HistoryEntry:
    return HistoryEntry(
        step=n, tool=ToolCall(name="t", args={"n": n}, id=f"c{n}"), observation=f"{n}", success=True
    )


def test_adding_gives_a_longer_history_and_leaves_the_older_one_as_it_was() -> None:
    one = History([entry(1)])
    two = one.added((entry(2),))
    three = two.added((entry(3),))
    assert list(one) == [entry(1)] and len(one) == 1
    assert list(two) == [entry(1), entry(2)]
    assert three[-1] == entry(3) and three[0:2] == (entry(1), entry(2))
    assert list(reversed(three)) == [entry(3), entry(2), entry(1)]
    with pytest.raises(IndexError, match="has 2 entries"):
        two[2]


def test_adding_to_an_older_history_does_not_change_the_newer_one() -> None:
    one = History([entry(1)])
    two = one.added((entry(2),))
    other = one.added((entry(9),))  # another fold from the same point
    assert list(two) == [entry(1), entry(2)]
    assert list(other) == [entry(1), entry(9)]
    assert list(History().added((entry(1),))) == [entry(1)]
    assert len(History()) == 0


def test_a_history_equals_the_tuple_or_list_of_its_entries_and_pickles() -> None:
    h = History([entry(1)]).added((entry(2),))
    assert h == (entry(1), entry(2)) and (entry(1), entry(2)) == h and h == [entry(1), entry(2)]
    assert h != (entry(1),) and h == History([entry(1), entry(2)])
    assert pickle.loads(pickle.dumps(h)) == h and copy.deepcopy(h) is h
    assert repr(h) == "History(2 entries)"


def test_memory_takes_any_sequence_of_entries_and_writes_history_as_a_list() -> None:
    memory = AgentMemory(task="t", history=(entry(1),))
    assert isinstance(memory.history, History)
    assert memory.model_dump(mode="json")["history"] == [entry(1).model_dump(mode="json")]
    back = AgentMemory.model_validate_json(memory.model_dump_json())
    assert back == memory and isinstance(back.history, History)
    assert pickle.loads(pickle.dumps(memory)) == memory


def test_a_memory_given_a_tuple_by_hand_still_folds() -> None:
    memory = AgentMemory(task="t").model_copy(update={"history": (entry(1),)})  # not validated
    after = apply(memory, f.ObservationCommitted(entries=(entry(2),)))
    assert isinstance(after.history, History) and after.history == (entry(1), entry(2))


def test_a_history_gives_the_images_of_its_entries_in_order_and_an_older_view_its_own() -> None:
    red = Image.from_bytes(_png(255, 0, 0))
    blue = Image.from_bytes(_png(0, 0, 255))
    plain = History([entry(1)])
    one = plain.added((entry(2).model_copy(update={"images": (red,)}),))
    two = one.added((entry(3), entry(4).model_copy(update={"images": (blue, red)})))
    assert list(plain.images()) == [] and list(one.images()) == [red]
    assert list(two.images()) == [red, blue, red]
    assert list(History(list(two)).images()) == [red, blue, red]  # counted when built whole too
    assert AgentMemory(task="look", history=two).images_sent() == [red, blue, red]


def _png(r: int, g: int, b: int) -> bytes:
    """A 1x1 PNG of one colour."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    pixel = zlib.compress(bytes([0, r, g, b]))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixel) + chunk(b"IEND", b"")
    )
