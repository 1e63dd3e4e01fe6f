"""The reducers' registry: which pure function folds each type of fact into memory.

A reducer is registered on `reduce_fact` for its fact type: the built-in ones in `reducers`,
a user's own through `custom.register_fact`. It knows fact types and nothing of memory's
module, so both can register here; `memory.apply` dispatches through it.
"""

from __future__ import annotations

from functools import singledispatch
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .memory import AgentMemory

__all__ = ["evolve", "keeps_memory", "reduce_fact", "unchanged"]


@singledispatch
def reduce_fact(fact: Any, memory: AgentMemory) -> AgentMemory:
    """The memory after `fact`, by the reducer registered for its type."""
    raise TypeError(f"apply() does not know the fact {fact!r}; add a reducer for its type.")


_new = object.__new__
_set = object.__setattr__


def evolve(memory: AgentMemory, changes: dict[str, Any]) -> AgentMemory:
    """`memory.model_copy(update=changes)` without its generic machinery: the reducers' values
    are already of the fields' types, and this runs for nearly every fact of every fold."""
    values = memory.__dict__.copy()
    values.update(changes)
    new = _new(type(memory))
    _set(new, "__dict__", values)
    _set(new, "__pydantic_fields_set__", memory.__pydantic_fields_set__ | changes.keys())
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def unchanged(fact: Any, memory: AgentMemory) -> AgentMemory:
    """The reducer of a fact that changes nothing."""
    return memory


def keeps_memory(kind: type) -> bool:
    """Whether facts of this type leave memory as it is (a fold need not decode them)."""
    return reduce_fact.dispatch(kind) is unchanged
