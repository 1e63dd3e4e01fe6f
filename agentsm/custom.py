"""Your own facts: a user's fact types, their reducers, and the parts of memory they fold into.

A user defines a fact type (a frozen pydantic model, best a `CustomFact`, with a `kind`
literal and a class-level `version`) and a pure reducer `(part, fact) -> part` over a part of
memory they name, and registers both with `AgentBuilder.fact(Type, reducer, part=...,
initial=...)`. A registration is process-wide, keyed by kind, as the built-in facts are: every
reader of a store in that process (Trace, replay, the fold) then decodes, upcasts and folds the
kind. A process without it (the CLI, the viewer) reads such a fact as an `UnknownFact` and
leaves its part as it was.

A part holds a read-only JSON value (text, numbers, booleans, None, arrays as tuples that also
equal lists, objects as read-only dicts; frozen pydantic models too), so that memory stays
frozen, comparable and cheap to copy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, PydanticUndefinedAnnotation

from .errors import BuildError, UnrecordableFact
from .facts import FACTS
from .frozen import FrozenDict
from .reducing import evolve, reduce_fact

if TYPE_CHECKING:
    from .memory import AgentMemory

__all__ = [
    "CustomFact",
    "FactRegistration",
    "PartArray",
    "Parts",
    "Reducer",
    "declared_records",
    "kind_of",
    "part_value",
    "register_fact",
    "registered_facts",
]

Reducer = Callable[[Any, Any], Any]
"""A pure function `(part, fact) -> part`: the value of a part of memory after one fact."""


class CustomFact(BaseModel):
    """Base of a user's own fact: frozen, no extra fields, and a `version` (raise it, with an
    upcaster registered on `agentsm.facts.FACTS`, when the fields change). Subclasses name
    their kind: `kind: Literal["TicketFiled"] = "TicketFiled"`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    version: ClassVar[int] = 1
    kind: str
    """Narrowed by each subclass to its own literal kind."""


@dataclass(frozen=True)
class FactRegistration:
    """A user's fact kind as registered: its type, the part it folds into, the part's initial
    value and the reducer."""

    model: type[BaseModel]
    part: str
    initial: Any
    reducer: Reducer

    @property
    def kind(self) -> str:
        """The kind the type declares."""
        return str(self.model.model_fields["kind"].default)

    def __repr__(self) -> str:
        name = getattr(self.reducer, "__name__", repr(self.reducer))
        return f"FactRegistration({self.kind!r} -> part {self.part!r}, reducer={name})"


_REGISTRY: dict[str, FactRegistration] = {}


def registered_facts() -> dict[str, FactRegistration]:
    """The user's fact kinds registered in this process, by kind."""
    return dict(_REGISTRY)


def kind_of(model: Any) -> str:
    """The kind a fact type declares; `BuildError` if it is not a frozen pydantic model with a
    `kind: Literal["..."]` field defaulting to that one kind."""
    if not isinstance(model, type) or not issubclass(model, BaseModel):
        raise BuildError(
            f"{model!r} is not a fact type: give a frozen pydantic model, e.g. a subclass of "
            'agentsm.CustomFact with kind: Literal["MyFact"] = "MyFact".'
        )
    name = model.__name__
    if not model.__pydantic_complete__:
        try:
            model.model_rebuild()
        except PydanticUndefinedAnnotation as e:
            raise BuildError(
                f"The fact type {name} is not fully defined: {e.message}. Import what its "
                "annotations name in its module (or call its model_rebuild()) before "
                "registering it."
            ) from None
    field = model.model_fields.get("kind")
    choices = get_args(field.annotation) if field is not None else ()
    if (
        field is None
        or get_origin(field.annotation) is not Literal
        or len(choices) != 1
        or not isinstance(choices[0], str)
        or field.default != choices[0]
    ):
        raise BuildError(
            f"The fact type {name} needs a field kind: Literal[{name!r}] = {name!r} (one kind, "
            "as its default): the log names each fact by its kind."
        )
    if not model.model_config.get("frozen"):
        raise BuildError(
            f"The fact type {name} is not frozen: a recorded fact never changes. Subclass "
            "agentsm.CustomFact, or set model_config = ConfigDict(frozen=True)."
        )
    version = getattr(model, "version", 1)
    if type(version) is not int or version < 1:
        raise BuildError(
            f"{name}.version is {version!r}; give a whole number from 1 up (a ClassVar)."
        )
    return str(choices[0])


def _same_definition(a: type[BaseModel], b: type[BaseModel]) -> bool:
    """Whether two types are one definition run twice (a notebook cell run again)."""
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def register_fact(
    model: type[BaseModel], reducer: Reducer, *, part: str, initial: Any = None
) -> FactRegistration:
    """Register a user's fact kind in this process: decoded, upcast and folded like a built-in
    fact from now on. Registering the same type again replaces its reducer (the latest is the
    one every fold uses); another type of the same kind, or a built-in kind, is refused."""
    kind = kind_of(model)
    name = model.__name__
    if kind in FACTS.builtin:
        raise BuildError(
            f"The fact type {name} declares the kind {kind!r}, which is a built-in fact of "
            "agentsm; give your fact a kind of its own."
        )
    if not callable(reducer):
        raise BuildError(
            f"The reducer of {kind} must be a function (part, fact) -> part, not {reducer!r}."
        )
    if not isinstance(part, str) or not part.strip():
        raise BuildError(f"The part {kind} folds into must be a non-empty name, not {part!r}.")
    try:
        start = part_value(initial)
    except (TypeError, ValueError) as e:
        raise BuildError(f"The initial value of part {part!r}: {e}.") from None
    existing = _REGISTRY.get(kind)
    if existing is not None and existing.model is not model:
        if not _same_definition(existing.model, model):
            raise BuildError(
                f"The kind {kind!r} is registered already, for the type "
                f"{existing.model.__module__}.{existing.model.__qualname__}; "
                f"{model.__module__}.{model.__qualname__} declares it too. Each kind has one "
                "type: rename one of them."
            )
    if existing is not None and existing.part != part:
        raise BuildError(
            f"{kind} folds into the part {existing.part!r} already (registered earlier in "
            f"this process, which keeps one part per kind); it cannot fold into {part!r} too: "
            f"keep {existing.part!r}, or restart the process (in a notebook, the kernel) to "
            "rename the part."
        )
    registration = FactRegistration(model, part, start, reducer)
    FACTS.add(model)
    reduce_fact.register(model)(_fold)
    _REGISTRY[kind] = registration
    return registration


def _fold(fact: Any, memory: AgentMemory) -> AgentMemory:
    """Apply a user's fact: its registered reducer gives its part's next value."""
    registration = _REGISTRY.get(fact.kind)
    if registration is None:  # pragma: no cover - a registered type always has one
        return memory
    parts = memory.parts
    name = registration.part
    before = parts[name] if name in parts else registration.initial
    after = registration.reducer(before, fact)
    if after is before:
        return memory
    try:
        after = part_value(after)
    except (TypeError, ValueError) as e:
        reducer = getattr(registration.reducer, "__name__", "its reducer")
        raise UnrecordableFact(
            fact.kind, f"the reducer {reducer} gave part {name!r} a value memory cannot hold: {e}"
        ) from None
    return evolve(memory, {"parts": FrozenDict({**parts, name: after})})


class PartArray(tuple[Any, ...]):
    """An array in a part of memory: a tuple that also equals the list of the same items and
    concatenates with lists, so that a reducer may write `part + [x]` as well as `part + (x,)`
    whatever its initial value was."""

    __slots__ = ()

    def __add__(self, other: Any) -> Any:
        if isinstance(other, list | tuple):
            return PartArray((*self, *other))
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, list | tuple):
            return PartArray((*other, *self))
        return NotImplemented

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


def part_value(value: Any, path: str = "the value") -> Any:
    """`value` as a part of memory holds it: arrays as `PartArray` tuples, objects as read-only
    dicts (the same object when it is so already). Raises TypeError or ValueError, naming where, for
    anything JSON cannot hold (a set, NaN, a key that is not text, a model that is not frozen)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path} is {value!r}, and JSON has no NaN or infinity")
        return value
    if isinstance(value, tuple | list):
        items = [part_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if type(value) is PartArray and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return PartArray(items)
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"{path} has the key {key!r}, and JSON keys are text")
        items_ = {k: part_value(v, f"{path}[{k!r}]") for k, v in value.items()}
        if isinstance(value, FrozenDict) and all(items_[k] is v for k, v in value.items()):
            return value
        return FrozenDict(items_)
    if isinstance(value, BaseModel) and value.model_config.get("frozen"):
        return value
    raise TypeError(
        f"{path} is a {type(value).__name__} ({value!r:.40}); a part holds text, numbers, "
        "booleans, None, tuples or lists, dicts with text keys, and frozen pydantic models"
    )


def _frozen_parts(parts: dict[str, Any]) -> FrozenDict:
    return FrozenDict({name: part_value(v, f"part {name!r}") for name, v in parts.items()})


Parts = Annotated[dict[str, Any], AfterValidator(_frozen_parts)]
"""Memory's parts field: each value as `part_value` makes it, in a read-only dict."""


def declared_records(records: Iterable[Any]) -> frozenset[str]:
    """The kinds named by a `records` declaration: fact types or kinds as text."""
    if isinstance(records, str | type):
        records = (records,)
    return frozenset(r if isinstance(r, str) else kind_of(r) for r in records)
