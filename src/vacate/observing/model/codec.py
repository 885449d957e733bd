"""Lossless JSON for the model's frozen dataclasses, checked on the way back in.

:func:`encode` turns a dataclass into plain JSON values, field by field (tuples become lists);
:func:`decode` rebuilds it from the field annotations, so every value is checked against the
type its field declares: a document that does not fit (a number where a path belongs, a missing
field, a list for an object) raises :class:`Malformed` naming the place, never a traceback
from deep inside. Annotations are read as the strings ``from __future__ import annotations``
leaves; the model's classes are found by name in :data:`CLASSES` (each model module registers
its own); a ``Literal[...]`` field takes only the values it names. ``Any`` (a
classification's ``details``) is any JSON value.

Paths are ``str`` decoded with ``surrogateescape``: Python's ``json`` writes the surrogates as
``\\udcXX`` escapes and reads them back as the same characters, so byte names survive.
Standard library only.
"""

from __future__ import annotations

import dataclasses

CLASSES: dict[str, type] = {}


class Malformed(ValueError):
    """A document does not have the shape its schema says: ``where`` is the path to the
    offending value (``target.mount.major``), ``why`` what was wrong with it."""

    def __init__(self, where: str, why: str):
        super().__init__(f"{where or 'document'}: {why}")
        self.where = where
        self.why = why


def load_json(text: str):
    """The JSON value ``text`` holds; :class:`Malformed` when it is not JSON."""
    import json

    try:
        return json.loads(text)
    except ValueError as e:
        raise Malformed("", f"not JSON: {e}") from None


def register(*classes: type) -> None:
    """Make these dataclasses decodable by their names."""
    for cls in classes:
        CLASSES[cls.__name__] = cls


def encode(v):
    """A model value as JSON values (dicts, lists, str, int, float, bool, None)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        hook = getattr(v, "encode_fields", None)
        if hook is not None:
            return hook()
        return {f.name: encode(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [encode(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return [encode(x) for x in sorted(v)]
    if isinstance(v, dict):
        return {str(k): encode(x) for k, x in v.items()}
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    as_json = getattr(v, "as_json", None)
    if as_json is not None:
        return encode(as_json())
    raise TypeError(f"not a model value: {type(v).__name__}")


def decode(cls: type, data, where: str = ""):
    """The ``cls`` value ``data`` encodes; :class:`Malformed` when it does not fit."""
    return _value(cls.__name__, data, where)


def fields_of(cls: type, data, where: str) -> dict:
    """The decoded fields of ``cls`` from the object ``data`` (for classes whose own
    ``decode_fields`` adds to them)."""
    if not isinstance(data, dict):
        raise Malformed(where, f"expected an object for {cls.__name__}, "
                               f"found {_kind(data)}")
    out = {}
    for f in dataclasses.fields(cls):
        at = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            if f.default is not dataclasses.MISSING or \
                    f.default_factory is not dataclasses.MISSING:
                continue
            raise Malformed(at, "missing")
        out[f.name] = _value(f.type, data[f.name], at)
    return out


def decode_annotation(ann: str, v, where: str):
    """``v`` decoded as the annotation ``ann`` (a field's, as a string) says."""
    return _value(ann, v, where)


def _kind(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


kind_of = _kind


def _split(s: str, sep: str) -> list[str]:
    """``s`` split at ``sep`` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i].strip())
            start = i + len(sep)
    parts.append(s[start:].strip())
    return parts


_LITERALS: dict[str, tuple] = {}


def _literals(ann: str) -> tuple:
    """The values a ``Literal[...]`` annotation allows."""
    got = _LITERALS.get(ann)
    if got is None:
        import ast

        got = ast.literal_eval(f"({ann[len('Literal['):-1]},)")
        if len(got) == 1 and isinstance(got[0], tuple):
            got = got[0]          # CPython 3.8 writes the annotation Literal[('a', 'b')]
        _LITERALS[ann] = got
    return got


_SCALARS = {"str": (str,), "int": (int,), "float": (float, int), "bool": (bool,)}
_NAMES = {"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean"}


def _value(ann: str, v, where: str):
    ann = ann.strip()
    alts = _split(ann, "|")
    if len(alts) > 1:
        if v is None and "None" in alts:
            return None
        some = [alt for alt in alts if alt != "None"]
        if len(some) == 1:            # X | None: what is wrong inside X, named where it is
            return _value(some[0], v, where)
        errors = []
        for alt in alts:
            if alt == "None":
                continue
            try:
                return _value(alt, v, where)
            except Malformed as e:
                errors.append(e.why)
        raise Malformed(where, " or ".join(dict.fromkeys(errors)))
    if ann == "None":
        if v is not None:
            raise Malformed(where, f"expected null, found {_kind(v)}")
        return None
    if ann == "Any":
        return v
    if ann.startswith("Literal["):
        allowed = _literals(ann)
        if isinstance(v, bool) or v not in allowed:
            found = repr(v) if isinstance(v, (str, int)) else _kind(v)
            raise Malformed(where, f"expected one of {', '.join(map(repr, allowed))}, "
                                   f"found {found}")
        return v
    if ann in _SCALARS:
        ok = _SCALARS[ann]
        if isinstance(v, bool) and ann != "bool" or not isinstance(v, ok):
            raise Malformed(where, f"expected {_NAMES[ann]}, found {_kind(v)}")
        return float(v) if ann == "float" else v
    if ann.startswith(("tuple[", "list[")):
        inner = _split(ann[ann.index("[") + 1:-1], ",")
        if not isinstance(v, list):
            raise Malformed(where, f"expected a list, found {_kind(v)}")
        if len(inner) == 2 and inner[1] == "..." or ann.startswith("list["):   # list[X]: any
            return tuple(_value(inner[0], x, f"{where}[{i}]") for i, x in enumerate(v))
        if len(inner) != len(v):
            raise Malformed(where, f"expected {len(inner)} values, found {len(v)}")
        return tuple(_value(a, x, f"{where}[{i}]") for i, (a, x) in enumerate(zip(inner, v)))
    if ann.startswith("dict["):
        if not isinstance(v, dict):
            raise Malformed(where, f"expected an object, found {_kind(v)}")
        _k, val = _split(ann[5:-1], ",")
        return {k: _value(val, x, f"{where}.{k}") for k, x in v.items()}
    cls = CLASSES.get(ann)
    if cls is None:
        raise TypeError(f"no decoder for the annotation {ann!r}")
    hook = getattr(cls, "decode_fields", None)
    kwargs = hook(v, where) if hook is not None else fields_of(cls, v, where)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise Malformed(where, str(e)) from None
