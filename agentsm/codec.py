"""How facts are written and read back: the round-trip rule, versions and upcasters.

Nothing is committed that cannot be read back: `encode` checks that decoding its own output
gives the same fact and raises `UnrecordableFact` otherwise (NaN, infinity, a lone surrogate, a
value JSON cannot hold). A fact whose fields are all plain (text, whole numbers, booleans, fixed
choices of text, None, tuples of text), with no validator that could change a value on the way
back, is checked by its values' exact types instead: JSON gives such values back exactly (a lone
surrogate cannot even be written), so decoding again would only repeat what the types prove.

Each kind of fact has a version (`version` on its class); `decode` turns an older version into
the current one through the registered upcasters, and refuses a version newer than this code
with `FactVersionTooNew`. A reader may ask for a kind it does not know (a user's own fact
whose type this process does not register) as an `UnknownFact` that keeps its kind, version and
payload.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_serializer

from .errors import FactVersionTooNew, UnreadableFact, UnrecordableFact
from .frozen import JsonObject

__all__ = ["FactCodec", "UnknownFact", "Upcaster", "clean_text", "value_problem"]

_SURROGATE = re.compile("[\ud800-\udfff]")

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns the JSON of one fact at version n into the JSON of the same fact at version n + 1."""


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so that it can be stored as UTF-8
    (for descriptions such as exception messages, which must never stop a fact's recording)."""
    return _SURROGATE.sub("\ufffd", text) if _has_surrogate(text) else text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _show(value: Any) -> str:
    text = ascii(value)
    return text if len(text) <= 40 else text[:39] + "…"


def value_problem(value: Any, path: str = "value") -> str | None:
    """The first part of `value` that JSON text cannot hold as it is, as a sentence naming its
    path, or None when it is plain JSON (dicts with string keys, lists, str, int, finite float,
    bool, None)."""
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return f"{path} is {value!r}, and JSON has no NaN or infinity"
    if isinstance(value, str):
        if _has_surrogate(value):
            at = _SURROGATE.search(value).start()  # type: ignore[union-attr]
            return f"{path} holds a lone surrogate ({_show(value[at])}) at index {at}"
        return None
    if isinstance(value, BaseModel):
        return value_problem(value.__dict__, path)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has the key {_show(key)}, and JSON keys are strings"
            problem = value_problem(key, f"{path} key") or value_problem(item, f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            problem = value_problem(item, f"{path}[{i}]")
            if problem:
                return problem
        return None
    return f"{path} is a {type(value).__name__} ({_show(value)}), which JSON cannot hold"


_KIND = frozenset({"kind"})

_SCALARS = (bool, int, float, str, tuple)


def _defaults(model: type[BaseModel]) -> tuple[tuple[str, Any], ...]:
    """The fields of `model` with a plain default (a number, a text, a flag, an empty tuple),
    each with it: a payload leaves out those at their default (decoding restores them).
    Nested models keep theirs, so that a nested fact still names its kind."""
    found = []
    for name, field in model.model_fields.items():
        default = field.default
        if name == "kind" or field.default_factory is not None or type(default) not in _SCALARS:
            continue
        if type(default) is tuple and default != ():
            continue
        found.append((name, default))
    return tuple(found)


"""What `encode` leaves out of every payload: the event names the kind."""

Check = Callable[[Any], bool]
"""Whether a field's value is one JSON gives back exactly, as its type says."""

_TEXTS = 4096  # plain facts' texts kept for reuse, at most

_INTS = 2**53  # beyond this, other JSON readers lose digits: the full check decides


def _exact(kind: type) -> Check:
    if kind is int:
        return lambda v: type(v) is int and -_INTS < v < _INTS
    return lambda v: type(v) is kind


def _check(annotation: Any) -> Check | None:
    """How to check a value of `annotation` exactly, or None when it is not plain."""
    if annotation in (str, bool, int):
        return _exact(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal and all(type(a) is str for a in args):
        allowed = frozenset(args)
        return lambda v: type(v) is str and v in allowed
    if origin in (Union, UnionType) and len(args) == 2 and NoneType in args:
        inner = _check(next(a for a in args if a is not NoneType))
        if inner is not None:
            checked = inner
            return lambda v: v is None or checked(v)
    if origin is tuple and args in ((str, Ellipsis),):
        return lambda v: type(v) is tuple and all(type(x) is str for x in v)
    if origin is tuple and args in ((int, Ellipsis),):
        return lambda v: type(v) is tuple and all(type(x) is int and -_INTS < x < _INTS for x in v)
    return None


def _is_none(value: Any) -> bool:
    return value is None


def _held(model: type[BaseModel]) -> dict[str, str]:
    """The fields a kind leaves to the envelope (its class-level `enveloped`), or none."""
    held = getattr(model, "enveloped", None)
    return dict(held) if isinstance(held, dict) else {}


def _accepts_none(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, UnionType) and NoneType in get_args(annotation)


def _plain(
    model: type[BaseModel], *, while_none: bool = False
) -> tuple[tuple[str, Check], ...] | None:
    """The exact checks of a model's fields when all are plain and nothing can change a value
    as it is read back (no validator, no constraint, no alias), else None. `while_none`: a
    field that is not plain but may be None (its default) counts as plain while it is None."""
    decorators = model.__pydantic_decorators__
    hooks = (getattr(decorators, f.name) for f in dataclasses.fields(decorators))
    settings = set(model.model_config) - {"frozen", "extra"}  # others may change a value
    if any(hooks) or settings or model.model_config.get("extra") == "allow":
        return None
    checks = []
    for name, info in model.model_fields.items():
        check = _check(info.annotation)
        if check is None and while_none and _accepts_none(info.annotation) and info.default is None:
            check = _is_none
        shaped = info.metadata or info.alias or info.serialization_alias or info.default_factory
        none_lost = info.is_required() or info.default is not None  # a None left out comes
        # back as the default: exact only when that is None (a value never is None otherwise)
        if check is None or shaped or (none_lost and _accepts_none(info.annotation)):
            return None
        checks.append((name, check))
    return tuple(checks)


def _kind(value: Any) -> str:
    """The JSON name of a value's type (a read-only list is a list)."""
    for plain in (dict, list):
        if isinstance(value, plain):
            return plain.__name__
    return type(value).__name__


def _difference(before: Any, after: Any, path: str) -> str | None:
    """Where a value read back differs from the one written (first path), as a sentence."""
    if type(before) is not type(after):
        return (
            f"{path} is the {_kind(before)} {_show(before)}, read back as the "
            f"{_kind(after)} {_show(after)}"
        )
    if isinstance(before, BaseModel):
        return _difference(before.__dict__, after.__dict__, path)
    if isinstance(before, dict):
        for key in before:
            if key not in after:
                return f"{path}.{key} is lost when read back"
            found = _difference(before[key], after[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(before, list | tuple):
        if len(before) != len(after):
            return f"{path} has {len(before)} items, read back as {len(after)}"
        for i, (a, b) in enumerate(zip(before, after, strict=True)):
            found = _difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    if before != after:
        return f"{path} is {_show(before)}, read back as {_show(after)}"
    return None


class UnknownFact(BaseModel):
    """A stored fact of a kind this process does not know: a user's own fact whose type is not
    registered here (the CLI, the viewer, a process that never imported the user's code). Its
    kind, stored version and payload are kept as they are, so that the log is read, shown,
    exported and copied whole; it changes no memory. It dumps as the fact it stands for."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str
    stored_version: int = 1
    payload: JsonObject

    @model_serializer
    def _as_stored(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.payload}

    def __repr__(self) -> str:
        shown = _show(dict(self.payload))
        return f"UnknownFact(kind={self.kind!r}, version={self.stored_version}, payload={shown})"


class FactCodec:
    """Encodes facts as JSON text and decodes them at the current version of their kind.

    `types` are the fact models (each with a `kind` literal and a `version` class variable);
    `register(kind, version)` adds the upcaster from that version to the next.
    """

    def __init__(self, types: Iterable[type[BaseModel]]) -> None:
        models = tuple(types)
        self.types: tuple[type[BaseModel], ...] = models
        self.versions: dict[str, int] = {
            m.model_fields["kind"].default: int(getattr(m, "version", 1)) for m in models
        }
        union: Any = Union[models]  # noqa: UP007 - a union built from a runtime tuple
        self.adapter: TypeAdapter[Any] = TypeAdapter(Annotated[union, Field(discriminator="kind")])
        self.models: dict[str, type[BaseModel]] = {
            m.model_fields["kind"].default: m for m in models
        }
        """The fact model of each kind."""
        self._json = {k: m.__pydantic_validator__.validate_json for k, m in self.models.items()}
        self._python = {k: m.__pydantic_validator__.validate_python for k, m in self.models.items()}
        # each kind's own validator: the payload need not name its kind (the event does), and
        # no discriminated union is searched
        self.upcasters: dict[tuple[str, int], Upcaster] = {}
        self._plain = {m: checks for m in models if (checks := _plain(m)) is not None}
        self._defaults: dict[type, tuple[tuple[str, Any], ...]] = {}
        self._plain_while_none = {
            m: checks
            for m in models
            if m not in self._plain and (checks := _plain(m, while_none=True)) is not None
        }
        """Kinds with fields that are not plain but are often None (a call named by its place
        leaves `call` None): checked by their values' types while those hold None."""
        self._texts: dict[tuple[Any, ...], str] = {}
        """The texts of plain facts met before (a run records the same transitions often)."""
        self._enveloped: dict[str, dict[str, str]] = {
            k: held for k, m in self.models.items() if (held := _held(m))
        }
        """Per kind, the fields the envelope's metadata holds (field: metadata key)."""
        self.builtin: frozenset[str] = frozenset(self.models)
        """The kinds this codec was made with; `add` makes more known (a user's own facts)."""

    def add(self, model: type[BaseModel]) -> None:
        """Make a further kind of fact known (a user's own, see `agentsm.custom`): encoded,
        checked, decoded and upcast exactly like the kinds the codec was made with."""
        kind = model.model_fields["kind"].default
        self.versions[kind] = int(getattr(model, "version", 1))
        self.models[kind] = model
        self._json[kind] = model.__pydantic_validator__.validate_json
        self._python[kind] = model.__pydantic_validator__.validate_python
        checks = _plain(model)
        if checks is not None:
            self._plain[model] = checks
        elif (checks := _plain(model, while_none=True)) is not None:
            self._plain_while_none[model] = checks
        held = _held(model)
        if held:
            self._enveloped[kind] = held
        else:
            self._enveloped.pop(kind, None)

    def version_of(self, fact: Any) -> int:
        """The version `fact` is written at: its kind's, or the stored one of an UnknownFact."""
        if isinstance(fact, UnknownFact):
            return fact.stored_version
        return self.versions[fact.kind]

    def register(self, kind: str, version: int) -> Callable[[Upcaster], Upcaster]:
        """Decorator: `func` turns `kind` at `version` into `kind` at `version + 1`."""

        def add(func: Upcaster) -> Upcaster:
            self.upcasters[(kind, version)] = func
            return func

        return add

    def version(self, kind: str) -> int:
        """The version of `kind` that this code writes."""
        return self.versions[kind]

    def encode(self, fact: BaseModel, meta: Mapping[str, Any] | None = None) -> str:
        """The fact as JSON text, after checking that it decodes to the same fact. The kind
        (the event names it), fields that are None and fields at a plain default (`_defaults`)
        are left out, decoding restores them;
        where it would not (a None whose default is not None), every field is written. Given
        the envelope's metadata, the fields it holds (the kind's `enveloped`) are left out
        where they are equal: `decode` with the same metadata restores them."""
        kind = str(getattr(fact, "kind", type(fact).__name__))
        if isinstance(fact, UnknownFact):  # read as it was stored: written back the same
            return json.dumps(fact.payload, separators=(",", ":"), ensure_ascii=False)
        left_out = _KIND
        held = self._enveloped.get(kind) if meta is not None else None
        if held:
            values = fact.__dict__
            same = {k for k, m in held.items() if m in meta and meta[m] == values.get(k)}  # type: ignore[operator,index]
            if same:
                left_out = _KIND | same
        else:
            meta = None
        plain = self._plain.get(type(fact))
        key: tuple[Any, ...] | None = None
        if plain is not None:  # its text depends on its values alone: written once per value
            values = fact.__dict__
            if all(check(values[name]) for name, check in plain):
                key = (type(fact), left_out, *values.values())
                known = self._texts.get(key)
                if known is not None:
                    return known
        defaults = self._defaults.get(type(fact))
        if defaults is None:
            defaults = self._defaults[type(fact)] = _defaults(type(fact))
        if defaults:
            values = fact.__dict__
            at_default = {
                n for n, d in defaults if type(values.get(n)) is type(d) and values[n] == d
            }
            if at_default:
                left_out = left_out | at_default
        try:
            text = fact.model_dump_json(exclude_none=True, exclude=left_out)  # type: ignore[arg-type]
        except ValueError:  # pydantic's serialization errors derive from ValueError
            found = value_problem(fact, kind) or f"{kind} cannot be written as JSON"
            raise UnrecordableFact(kind, found) from None
        if key is not None:
            if len(self._texts) >= _TEXTS:
                self._texts.clear()
            self._texts[key] = text
            return text
        plain = self._plain_while_none.get(type(fact))
        if plain is not None:
            values = fact.__dict__
            if all(check(values[name]) for name, check in plain):
                return text
        back = self._back(kind, text, meta)
        if back == fact:
            return text
        text = fact.model_dump_json()  # every field, None included
        back = self._back(kind, text)
        if back != fact:
            problem = value_problem(fact, kind)
            if problem is None and back is not None:
                problem = _difference(fact, back, kind)
            raise UnrecordableFact(kind, problem or f"{kind} does not read back as written")
        return text

    def _back(self, kind: str, text: str, meta: Mapping[str, Any] | None = None) -> Any:
        """The fact `text` decodes to as `kind`, or None when it does not decode."""
        validate = self._json.get(kind)
        try:
            if meta is not None:
                return self._python[kind](self._restored(kind, json.loads(text), meta))
            return validate(text) if validate is not None else None
        except ValidationError:
            return None

    def _restored(self, kind: str, data: Any, meta: Mapping[str, Any]) -> Any:
        """A payload's data with the fields the envelope holds put back where it left them."""
        if isinstance(data, dict):
            for name, key in self._enveloped[kind].items():
                if name not in data and key in meta:
                    data[name] = meta[key]
        return data

    def enveloped(self, kind: str) -> bool:
        """Whether facts of `kind` may leave fields to the envelope (decode them with `meta`)."""
        return kind in self._enveloped

    def decode(
        self,
        payload: str,
        kind: str,
        version: int = 1,
        *,
        run_id: str = "",
        seq: int = 0,
        custom: bool = False,
        meta: Mapping[str, Any] | None = None,
    ) -> Any:
        """The fact stored as `payload` at `version`, upcast to the current version of `kind`;
        `meta` (the envelope's metadata) gives back the fields the payload left to it.
        With `custom`, a kind this process does not know (a user's own fact whose type is not
        registered here) is an `UnknownFact` holding its kind and payload; without, it is
        refused.

        Raises `FactVersionTooNew` for a version newer than this code, `UnreadableFact` for
        anything else that cannot be decoded; both name the run, the seq and the kind."""
        current = self.versions.get(kind)
        if current is None and custom and kind not in self.builtin:
            try:
                data = json.loads(payload)
                if not isinstance(data, dict):
                    raise TypeError(f"the payload is {type(data).__name__}, not an object")
                data.pop("kind", None)
                return UnknownFact(kind=kind, stored_version=version, payload=data)
            except (ValueError, TypeError) as e:
                raise UnreadableFact(run_id, seq, kind, repr(e)) from e
        if current is None:
            raise UnreadableFact(run_id, seq, kind, f"this agentsm knows no fact kind {kind!r}")
        if version > current:
            raise FactVersionTooNew(run_id, seq, kind, version, current)
        held = meta is not None and kind in self._enveloped
        try:
            if version == current and not held:
                return self._json[kind](payload)
            data = json.loads(payload)
            for step in range(version, current):
                upcast = self.upcasters.get((kind, step))
                if upcast is None:
                    raise UnreadableFact(
                        run_id, seq, kind, f"no upcaster turns version {step} into {step + 1}"
                    )
                data = upcast(data)
            if held:
                data = self._restored(kind, data, meta)  # type: ignore[arg-type]
            return self._python[kind](data)
        except (ValidationError, ValueError, KeyError, TypeError) as e:
            reason = e.errors()[0]["msg"] if isinstance(e, ValidationError) else repr(e)
            where = ""
            if isinstance(e, ValidationError) and e.errors()[0]["loc"]:
                where = " at " + ".".join(str(p) for p in e.errors()[0]["loc"])
            raise UnreadableFact(run_id, seq, kind, f"{reason}{where}") from e

    def __repr__(self) -> str:
        return f"FactCodec({len(self.versions)} kinds, {len(self.upcasters)} upcasters)"
