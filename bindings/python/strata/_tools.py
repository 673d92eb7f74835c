"""Tool schemas from Python functions: the JSON Schema of a function's parameters built from its
type hints and docstring, the way the OpenAI Agents SDK's ``function_tool`` does, and the model's
JSON arguments converted back to the annotated types (Enum members, dataclass instances).

Supported parameter types: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any`` (or no
annotation), ``list``/``List[X]``/``Sequence[X]``, ``set[X]``, ``tuple[X, ...]``/``tuple[A, B]``,
``dict``/``Dict[str, X]``/``Mapping[str, X]``, ``Optional[X]``, ``Union[...]``, ``X | Y``,
``Literal[...]``, ``Enum`` subclasses, ``TypedDict`` classes, dataclasses, and
``Annotated[X, "description"]``. Anything else raises a TypeError naming the parameter and type.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import re
import sys
import typing
from typing import Any, Callable, Dict, List, Optional, Tuple

_ANNOTATED = getattr(typing, "Annotated", None)  # Python 3.9+


def _hints(obj: Any) -> Dict[str, Any]:
    if _ANNOTATED is not None:
        return typing.get_type_hints(obj, include_extras=True)
    return typing.get_type_hints(obj)

_SUPPORTED = ("str, int, float, bool, None, Any, list[X], set[X], tuple[...], dict[str, X], "
              "Optional[X], Union[...], Literal[...], an Enum, a TypedDict or a dataclass")

_PRIMITIVES: Dict[Any, Dict[str, Any]] = {
    str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"},
    bool: {"type": "boolean"}, type(None): {"type": "null"},
}

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|"
                      r"Notes?|Attributes|See Also|Warnings?)\s*:?\s*$")


class _Unsupported(TypeError):
    pass


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__annotations__") and \
        hasattr(tp, "__total__")


def _literal_schema(values: Tuple[Any, ...]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"enum": list(values)}
    kinds = {type(v) for v in values}
    if len(kinds) == 1:
        kind = kinds.pop()
        if kind in _PRIMITIVES:
            out["type"] = _PRIMITIVES[kind]["type"]
    return out


def _object_schema(tp: Any, hints: Dict[str, Any], required: List[str],
                   descriptions: Dict[str, str], defs: Dict[str, Any]) -> Dict[str, Any]:
    properties = {}
    for field, hint in hints.items():
        schema = _schema(hint, defs)
        if field in descriptions:
            schema = dict(schema, description=descriptions[field])
        properties[field] = schema
    out: Dict[str, Any] = {"type": "object", "properties": properties, "required": required,
                           "additionalProperties": False}
    doc = _own_doc(tp)
    if doc and not doc.startswith(tp.__name__ + "("):  # a dataclass's generated docstring
        out["description"] = _summary(doc)
    return out


def _own_doc(tp: Any) -> str:
    """The class's own docstring (not one inherited from dict or Enum), cleaned."""
    doc = tp.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def _schema(tp: Any, defs: Dict[str, Any]) -> Dict[str, Any]:
    """The JSON Schema of one annotation. Raises _Unsupported for one it cannot express."""
    if tp is Any or tp is inspect.Parameter.empty:
        return {}
    if tp is None:
        return {"type": "null"}
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if (_ANNOTATED is not None and origin is _ANNOTATED):
        schema = _schema(args[0], defs)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return dict(schema, description=" ".join(notes)) if notes else schema
    if origin is typing.Literal:
        return _literal_schema(args)
    if origin is typing.Union or (sys.version_info >= (3, 10) and
                                  origin is getattr(__import__("types"), "UnionType", None)):
        return {"anyOf": [_schema(a, defs) for a in args]}
    if tp in (list, collections.abc.Sequence) or origin in (list, collections.abc.Sequence):
        return {"type": "array", "items": _schema(args[0], defs)} if args else {"type": "array"}
    if tp in (set, frozenset) or origin in (set, frozenset, collections.abc.Set):
        out: Dict[str, Any] = {"type": "array", "uniqueItems": True}
        if args:
            out["items"] = _schema(args[0], defs)
        return out
    if tp is tuple or origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema(args[0], defs)}
        return {"type": "array", "prefixItems": [_schema(a, defs) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    if tp in (dict, collections.abc.Mapping) or origin in (dict, collections.abc.Mapping):
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise _Unsupported(f"{_name(tp)} (JSON object keys are strings: use Dict[str, ...])")
        return {"type": "object", "additionalProperties": _schema(args[1], defs)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        out = _literal_schema(tuple(m.value for m in tp))
        doc = _own_doc(tp)
        if doc and not doc.startswith("An enumeration"):
            out["description"] = _summary(doc)
        return out
    if _is_typeddict(tp):
        hints = _hints(tp)
        required = [k for k in hints if k in getattr(tp, "__required_keys__", hints)]
        return _object_schema(tp, hints, required, _field_docs(tp), defs)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = _hints(tp)
        fields = [f for f in dataclasses.fields(tp) if f.init]
        required = [f.name for f in fields if f.default is dataclasses.MISSING and
                    f.default_factory is dataclasses.MISSING]
        return _object_schema(tp, {f.name: hints[f.name] for f in fields}, required,
                              _field_docs(tp), defs)
    raise _Unsupported(_name(tp))


def _name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else repr(tp).replace("typing.", "")


def _summary(doc: str) -> str:
    """The docstring's text before its first section (Args:, Returns:, a NumPy title over
    dashes, :param ...:), whitespace collapsed."""
    lines = doc.strip().splitlines()
    kept: List[str] = []
    for i, line in enumerate(lines):
        numpy_title = i + 1 < len(lines) and re.match(r"^\s*-{3,}\s*$", lines[i + 1])
        if _SECTION.match(line) or line.strip().startswith(":") or numpy_title:
            break
        kept.append(line.strip())
    return " ".join(" ".join(kept).split())


def _param_docs(doc: str) -> Dict[str, str]:
    """Parameter descriptions of a Google-, Sphinx- or NumPy-style docstring."""
    out: Dict[str, str] = {}
    lines = doc.splitlines()
    # Sphinx: ":param name: text" (continued on indented lines).
    for i, line in enumerate(lines):
        m = re.match(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$", line)
        if m:
            text = [m.group(2)]
            for more in lines[i + 1:]:
                if not more.strip() or more.strip().startswith(":"):
                    break
                text.append(more.strip())
            out[m.group(1)] = " ".join(" ".join(text).split())
    # Google: "Args:" then "name (type): text", continuation lines indented deeper.
    # NumPy: "Parameters" over dashes, then "name : type" and the text indented below.
    i = 0
    while i < len(lines):
        line = lines[i]
        google = re.match(r"^(\s*)(Args|Arguments|Parameters|Params)\s*:\s*$", line)
        numpy = (re.match(r"^\s*(Parameters|Params)\s*$", line) and i + 1 < len(lines) and
                 re.match(r"^\s*-{3,}\s*$", lines[i + 1]))
        if not (google or numpy):
            i += 1
            continue
        i += 2 if numpy else 1
        current: Optional[str] = None
        item_indent = None
        while i < len(lines):
            body = lines[i]
            if not body.strip():
                i += 1
                if numpy and i < len(lines) and lines[i].strip() and \
                        (i + 1 < len(lines) and re.match(r"^\s*-{3,}\s*$", lines[i + 1])):
                    break
                continue
            indent = len(body) - len(body.lstrip())
            if _SECTION.match(body) and (item_indent is None or indent < item_indent):
                break
            if google:
                m = re.match(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", body)
            else:
                m = re.match(r"^\s*(\w+)\s*(?::.*)?$", body)
            if m and (item_indent is None or indent <= item_indent):
                item_indent = indent
                current = m.group(1)
                out[current] = m.group(2).strip() if google else ""
            elif current is not None:
                out[current] = (out[current] + " " + body.strip()).strip()
            else:
                break
            i += 1
    return out


def _field_docs(tp: Any) -> Dict[str, str]:
    doc = _own_doc(tp)
    out = _param_docs(doc)
    if not out:  # "Attributes:" of a dataclass or TypedDict
        out = _param_docs(re.sub(r"^(\s*)Attributes\s*:", r"\1Args:", doc, flags=re.M))
    return out


def _jsonable(value: Any) -> bool:
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


def function_schema(fn: Callable[..., Any], name: Optional[str] = None) -> Dict[str, Any]:
    """The tool schema of ``fn`` (``{"description": ..., "parameters": {...}}``): its parameters'
    JSON Schema from their type hints (required: those without a default; a JSON-compatible
    default is given as ``default``), the description from its docstring's summary, each
    parameter's description from its Args/Parameters/:param: entry.

    Raises TypeError naming the parameter and its type when a type has no JSON Schema form, and
    for ``*args``/``**kwargs`` (the model passes arguments by name)."""
    tool = name or fn.__name__
    signature = inspect.signature(fn)
    try:
        hints = _hints(fn)
    except Exception as e:  # an annotation naming something undefined
        raise TypeError(f"tool {tool}: its type hints cannot be resolved ({e})") from None
    doc = inspect.getdoc(fn) or ""
    descriptions = _param_docs(doc)
    properties: Dict[str, Any] = {}
    required: List[str] = []
    defs: Dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {tool}: parameter {param.name!r} is *args or **kwargs, which "
                            "the model cannot pass by name; list the parameters explicitly or "
                            "give the schema: @agent.tool(name, schema)")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"tool {tool}: parameter {param.name!r} is positional-only; the "
                            "model passes arguments by name")
        hint = hints.get(param.name, Any)
        try:
            schema = _schema(hint, defs)
        except _Unsupported as e:
            raise TypeError(
                f"tool {tool}: parameter {param.name!r} has type {e}, which has no JSON Schema "
                f"form (supported: {_SUPPORTED}); change the annotation or give the schema: "
                "@agent.tool(name, schema)") from None
        if param.name in descriptions and descriptions[param.name]:
            schema = dict(schema, description=descriptions[param.name])
        if param.default is param.empty:
            required.append(param.name)
        elif _jsonable(param.default):
            schema = dict(schema, default=param.default)
        elif isinstance(param.default, enum.Enum) and _jsonable(param.default.value):
            schema = dict(schema, default=param.default.value)
        properties[param.name] = schema
    parameters = {"type": "object", "properties": properties, "required": required,
                  "additionalProperties": False}
    return {"description": _summary(doc) or tool, "parameters": parameters}


def _convert(value: Any, tp: Any) -> Any:
    """The model's JSON value as the annotated type: Enum members and dataclass instances are
    made from their JSON form, tuples and sets from lists; other values are passed as given."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if (_ANNOTATED is not None and origin is _ANNOTATED):
        return _convert(value, args[0])
    if origin is typing.Union or (sys.version_info >= (3, 10) and
                                  origin is getattr(__import__("types"), "UnionType", None)):
        if value is None:
            return None
        for a in args:
            if a is not type(None):
                try:
                    return _convert(value, a)
                except (TypeError, ValueError):
                    continue
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type) and isinstance(value, dict):
        hints = typing.get_type_hints(tp)
        return tp(**{k: _convert(v, hints.get(k, Any)) for k, v in value.items()})
    if isinstance(value, list):
        if origin in (list, collections.abc.Sequence) and args:
            return [_convert(v, args[0]) for v in value]
        if tp in (set, frozenset) or origin in (set, frozenset, collections.abc.Set):
            items = [_convert(v, args[0]) for v in value] if args else value
            return (frozenset if (origin or tp) is frozenset else set)(items)
        if tp is tuple or origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_convert(v, args[0]) for v in value)
            if args and len(args) == len(value):
                return tuple(_convert(v, a) for v, a in zip(value, args))
            return tuple(value)
    if isinstance(value, dict) and origin in (dict, collections.abc.Mapping) and len(args) == 2:
        return {k: _convert(v, args[1]) for k, v in value.items()}
    return value


def argument_converter(fn: Callable[..., Any]) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """A function that converts the model's arguments to ``fn``'s annotated types."""
    try:
        hints = _hints(fn)
    except Exception:
        hints = {}
    hints.pop("return", None)

    def convert(arguments: Dict[str, Any]) -> Dict[str, Any]:
        return {k: _convert(v, hints[k]) if k in hints else v for k, v in arguments.items()}

    return convert
