"""History: the read-only sequence of a run's committed entries, grown in O(1) per entry.

Memory is folded fact by fact, and each step adds an entry to a history that may hold tens of
thousands: copying it at each step would make a run quadratic. A `History` is a view of the
first `len` items of a list that successive histories share: adding entries to the newest
history appends to that list (amortized O(1)) and gives a longer view, while every older view
still shows exactly what it showed. Adding to an older view (a fold that went another way from
the same point) copies its items first, so no view ever changes. For a reader it is a tuple:
indexing, slicing, iteration, `len`, `==` with any sequence, hashing, pickling, JSON as a list.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, overload

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from .images import Image
from .text import plural
from .types import HistoryEntry

__all__ = ["History"]

_GROW = threading.Lock()  # two folds adding to one view: the second one copies


class History(Sequence[HistoryEntry]):
    """A run's history entries, oldest first: an immutable sequence that `added` extends
    without copying the entries before it."""

    __slots__ = ("_items", "_size", "_imaged")

    _items: list[HistoryEntry]
    _size: int
    _imaged: int  # how many of its entries carry images (most runs: none, so none is sought)

    def __init__(self, entries: Iterable[HistoryEntry] = ()) -> None:
        self._items = list(entries)
        self._size = len(self._items)
        self._imaged = _imaged(self._items)

    @classmethod
    def _view(cls, items: list[HistoryEntry], size: int, imaged: int) -> History:
        view = cls.__new__(cls)
        view._items = items
        view._size = size
        view._imaged = imaged
        return view

    def images(self) -> Iterator[Image]:
        """The images of its entries, in order (at once when no entry has any)."""
        if self._imaged:
            for entry in self:
                yield from entry.images

    def added(self, entries: Sequence[HistoryEntry]) -> History:
        """This history followed by `entries` (this one is unchanged)."""
        if not entries:
            return self
        with _GROW:
            if self._size and len(self._items) == self._size:
                items = self._items  # the newest view: the list is ours to extend
            else:
                items = self._items[: self._size]
            items.extend(entries)
            return History._view(items, len(items), self._imaged + _imaged(entries))

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> HistoryEntry: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[HistoryEntry, ...]: ...

    def __getitem__(self, index: int | slice) -> HistoryEntry | tuple[HistoryEntry, ...]:
        if isinstance(index, slice):
            return tuple(self._items[: self._size][index])
        size = self._size
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError(
                f"history index out of range (it has {plural(size, 'entry', 'entries')})"
            )
        return self._items[index]

    def __iter__(self) -> Iterator[HistoryEntry]:
        return islice(self._items, self._size)

    def __reversed__(self) -> Iterator[HistoryEntry]:
        items = self._items
        return (items[i] for i in range(self._size - 1, -1, -1))

    def __add__(self, other: Sequence[HistoryEntry]) -> History:
        return self.added(tuple(other))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            if other._items is self._items and other._size == self._size:
                return True
        elif not isinstance(other, tuple | list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __copy__(self) -> History:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> History:
        return self

    def __reduce__(self) -> tuple[type[History], tuple[tuple[HistoryEntry, ...]]]:
        return History, (tuple(self),)

    def __repr__(self) -> str:
        return f"History({plural(len(self), 'entry', 'entries')})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """Validated from any sequence of entries (a History is taken as it is), written as a
        list of entries."""
        entries = handler.generate_schema(tuple[HistoryEntry, ...])
        from_entries = core_schema.no_info_after_validator_function(cls, entries)
        return core_schema.json_or_python_schema(
            json_schema=from_entries,
            python_schema=core_schema.union_schema(
                [core_schema.is_instance_schema(cls), from_entries]
            ),
            serialization=core_schema.plain_serializer_function_ser_schema(
                tuple, return_schema=entries
            ),
        )


def _imaged(entries: Iterable[HistoryEntry]) -> int:
    """How many of `entries` carry images."""
    return sum(1 for entry in entries if entry.images)
