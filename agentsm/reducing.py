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

__all__ = ["evolve", "keeps_memory", "reduce_fact", "reducer_of", "unchanged"]


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


_FOUND: dict[type, Any] = {}
_register = reduce_fact.register


def _registering(cls: Any, func: Any = None) -> Any:
    """`reduce_fact.register`, forgetting the reducers `reducer_of` remembered once it has
    registered (also when a type's reducer is replaced)."""
    done = _register(cls, func)
    if func is None and isinstance(cls, type):  # the decorator form: registers when applied

        def apply(reducer: Any) -> Any:
            registered = done(reducer)  # type: ignore[no-untyped-call]
            _FOUND.clear()
            return registered

        return apply
    _FOUND.clear()
    return done


reduce_fact.register = _registering  # type: ignore[method-assign]


def reducer_of(kind: type) -> Any:
    """The reducer of a type of fact: `reduce_fact.dispatch`, remembered in a plain dict (the
    dispatcher's own cache is a weak mapping, dearer per fact)."""
    found = _FOUND.get(kind)
    if found is None:
        found = _FOUND[kind] = reduce_fact.dispatch(kind)
    return found


def unchanged(fact: Any, memory: AgentMemory) -> AgentMemory:
    """The reducer of a fact that changes nothing."""
    return memory


def keeps_memory(kind: type) -> bool:
    """Whether facts of this type leave memory as it is (a fold need not decode them)."""
    return reduce_fact.dispatch(kind) is unchanged
