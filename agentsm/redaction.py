"""Redaction: hooks that rewrite the text of a fact before it is recorded, so that secrets and
personal data never reach the log, its exports or its traces.

Redaction goes by shape, not by name: every string a fact holds passes the hooks (every field
and nested model, the keys and values of free-form objects such as tool arguments, JSON
schemas and settings, a user's own facts alike), except the values of fixed choices (a
`Literal` or an `Enum`: the `kind`, a status, a verdict), which cannot hold a secret. What a run
records is the redacted text: memory, the LLM's view of the run, approvals, exports and
replays all hold it. Only a tool receives the real arguments, kept in the process's memory for
the run's own calls (a run resumed in another process gives its tools the redacted values).
Hooks must be idempotent: redacting redacted text changes nothing, which is what keeps replay
exact.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator, Sequence
from enum import Enum
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

from .codec import UnknownFact
from .frozen import freeze
from .images import carry_data, image_data
from .types import ToolCall

__all__ = ["REDACTED", "Hook", "Redactor"]

REDACTED = "[REDACTED]"
"""What a pattern's matches are replaced with."""

Hook = str | re.Pattern[str] | Callable[[str], str]
"""A regular expression (its matches become `[REDACTED]`) or a function `text -> text`."""

_F = TypeVar("_F", bound=BaseModel)

_NOT_TEXT = (int, float, bool, NoneType)


def _pattern(pattern: re.Pattern[str]) -> Callable[[str], str]:
    def redact(text: str) -> str:
        return pattern.sub(REDACTED, text)

    return redact


def _key(call_id: object, args: object) -> str:
    return json.dumps([call_id, args], sort_keys=True, ensure_ascii=False)


def _leaves(annotation: Any) -> Iterator[Any]:
    """The types a value of `annotation` may be, through Optional, unions, Annotated and
    sequences (a mapping or a model is a leaf of its own)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _leaves(get_args(annotation)[0])
    elif origin in (Union, UnionType) or origin in (tuple, list, set, frozenset):
        for arg in get_args(annotation):
            if arg is not Ellipsis:
                yield from _leaves(arg)
    else:
        yield annotation


def _is_model(leaf: Any) -> bool:
    return isinstance(leaf, type) and issubclass(leaf, BaseModel)


def _is_mapping(leaf: Any) -> bool:
    return leaf is dict or get_origin(leaf) is dict


class _Shape:
    """What redaction needs to know of one annotation: whether its strings are fixed choices,
    the models its objects may be, and the key and value annotations of a free-form object."""

    __slots__ = ("fixed", "key", "models", "value")

    def __init__(self, annotation: Any) -> None:
        leaves = list(_leaves(annotation))
        choices, free = False, False
        for leaf in leaves:
            if get_origin(leaf) is Literal or (isinstance(leaf, type) and issubclass(leaf, Enum)):
                choices = True
            elif not (leaf in _NOT_TEXT or _is_model(leaf) or _is_mapping(leaf)):
                free = True  # str, Any, anything unknown: may hold text
        self.fixed = choices and not free
        self.models: tuple[type[BaseModel], ...] = tuple(x for x in leaves if _is_model(x))
        mapping = next((x for x in leaves if get_origin(x) is dict), None)
        self.key, self.value = get_args(mapping) if mapping is not None else (Any, Any)


_SHAPES: dict[Any, _Shape] = {}
_ANY = _Shape(Any)


def _shape(annotation: Any) -> _Shape:
    try:
        found = _SHAPES.get(annotation)
    except TypeError:  # an annotation that cannot be a key: worked out each time
        return _Shape(annotation)
    if found is None:
        found = _SHAPES[annotation] = _Shape(annotation)
    return found


_FIELDS: dict[type[BaseModel], dict[str, _Shape]] = {}


def _fields(model: type[BaseModel]) -> dict[str, _Shape]:
    found = _FIELDS.get(model)
    if found is None:
        found = _FIELDS[model] = {n: _shape(i.annotation) for n, i in model.model_fields.items()}
    return found


def _unredacted(model: type[BaseModel]) -> frozenset[str]:
    """The fields a model says hold no text to redact (`Image`: its digest and media type)."""
    kept = getattr(model, "unredacted", None)
    return kept if isinstance(kept, frozenset) else frozenset()


def _model_for(shape: _Shape, data: dict[str, Any]) -> type[BaseModel] | None:
    """The model an object of this shape is (None: a free-form object)."""
    if len(shape.models) == 1:
        return shape.models[0]
    for model in shape.models:  # a union of models: the one whose kind it names, or fields
        kind = model.model_fields.get("kind")
        if kind is not None and data.get("kind") == kind.default:
            return model
    return next((m for m in shape.models if set(data) <= set(m.model_fields)), None)


class Redactor:
    """An agent's redaction hooks, applied in order to every string of each fact.

    `fact()` returns the fact as it is to be recorded and remembers the real arguments of any
    call it redacted, which `reveal()` gives back to the tool that runs the call."""

    def __init__(self, hooks: Sequence[tuple[str, Callable[[str], str]]]) -> None:
        self._hooks = tuple(hooks)
        self._originals: dict[str, list[Any]] = {}

    @classmethod
    def of(cls, hooks: Sequence[tuple[str | None, Hook]]) -> Redactor:
        """Hooks as given to `AgentBuilder.redact`: patterns compiled, each with its label
        (the given name, a function's qualified name, or `pattern N`; never the pattern)."""
        made: list[tuple[str, Callable[[str], str]]] = []
        for n, (name, hook) in enumerate(hooks, start=1):
            if isinstance(hook, str):
                hook = re.compile(hook)
            if isinstance(hook, re.Pattern):
                made.append((name or f"pattern {n}", _pattern(hook)))
            else:
                label = f"{getattr(hook, '__module__', '')}.{getattr(hook, '__qualname__', '')}"
                made.append((name or label.strip("."), hook))
        return cls(made)

    @property
    def labels(self) -> tuple[str, ...]:
        """What the run's definition records about the hooks: their labels, in order."""
        return tuple(label for label, _ in self._hooks)

    def text(self, text: str) -> str:
        """`text` through every hook."""
        for _, hook in self._hooks:
            text = hook(text)
        return text

    def value(self, value: Any) -> Any:
        """Every string inside a JSON value redacted, the keys of its objects too."""
        return self._typed(value, _ANY, {})

    def fact(self, fact: _F) -> _F:
        """The fact as it is to be recorded: the same object when no hook changed anything."""
        if not self._hooks:
            return fact
        if isinstance(fact, UnknownFact):  # a kind this process does not know: all free-form
            payload = self.value(dict(fact.payload))
            if payload == fact.payload:
                return fact
            return fact.model_copy(update={"payload": freeze(payload)})
        data = fact.model_dump(mode="json")
        found: dict[str, list[Any]] = {}
        redacted = self._model(type(fact), data, found)
        if redacted == data:
            return fact
        self._originals.update(found)  # the latest fact that held real arguments wins
        made = type(fact).model_validate(redacted)  # a user's own fact type too
        carry_data(made, image_data(fact))  # its images' bytes, which JSON does not hold
        return made

    def reveal(self, call: ToolCall, ordinal: int = 0) -> ToolCall:
        """The call with the real arguments this process redacted from it (or as it is);
        `ordinal` tells apart calls that look the same once redacted (same id, same redacted
        arguments): the n-th of them in the plan gets the n-th real arguments."""
        if not self._originals:  # nothing was redacted from a call: no key to build
            return call
        originals = self._originals.get(_key(call.id, call.model_dump(mode="json")["args"]))
        if not originals:
            return call
        original = originals[min(ordinal, len(originals) - 1)]
        return call.model_copy(update={"args": copy.deepcopy(original)})

    def _model(
        self, model: type[BaseModel], data: dict[str, Any], found: dict[str, list[Any]]
    ) -> dict[str, Any]:
        """A model's JSON with every string of its fields redacted (fixed choices kept); the
        real arguments of a call (a model with `args` and an id) are kept in `found`."""
        shapes = _fields(model)
        kept = _unredacted(model)
        out = {
            key: value if key in kept else self._typed(value, shapes.get(key, _ANY), found)
            for key, value in data.items()
        }
        args = data.get("args")
        if isinstance(args, dict) and out["args"] != args and "args" in shapes:
            owner = out.get("id", out.get("call_id"))  # as the recorded call names it
            found.setdefault(_key(owner, out["args"]), []).append(args)
        return out

    def _typed(self, value: Any, shape: _Shape, found: dict[str, list[Any]]) -> Any:
        if isinstance(value, str):
            return value if shape.fixed else self.text(value)
        if isinstance(value, list):
            return [self._typed(item, shape, found) for item in value]
        if isinstance(value, dict):
            model = _model_for(shape, value) if shape.models else None
            if model is not None:
                return self._model(model, value, found)
            keys, values = _shape(shape.key), _shape(shape.value)
            return {
                (k if keys.fixed else self.text(k)): self._typed(v, values, found)
                for k, v in value.items()
            }
        return value

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def __repr__(self) -> str:
        return f"Redactor({list(self.labels)!r})"
