#!/usr/bin/env python3
"""Generates bindings/python/strata/_records.py, the typed Python forms of strata's C++ record
types (RequestRecord, PrefixBreakEvent, CompactionReport, GrowthPoint, Usage, Timings,
StoredEvent) and of the status codes and layer names, from the public headers that define them,
and the agent configuration's TypedDicts from the keys its parser (sdk/src/agent/config.cc) reads:
one frozen dataclass per struct, one field per member with its C++ comment as documentation and
its type mapped (std::string -> str, integers -> int, double -> float, std::optional<T> ->
Optional[T], enums -> Literal of their names). The JSON a struct is written as differs from its
members in a few places (a renamed key, a computed one); SPECS below says where.

    gen_records.py            rewrites strata/_records.py
    gen_records.py --check    exits 1 (printing a diff) when strata/_records.py is not what the
                              headers generate (the ctest test `python: records match the C++
                              definitions`)
"""

from __future__ import annotations

import difflib
import pathlib
import re
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
INCLUDE = REPO / "sdk" / "include" / "strata"
OUTPUT = HERE / "strata" / "_records.py"


class Member(NamedTuple):
    name: str
    cpp_type: str
    doc: str
    initializer: str  # "" when none


class Field(NamedTuple):
    name: str       # the JSON key and the Python attribute
    py_type: str
    default: str    # Python expression used when the key is absent from the JSON
    doc: str


class Spec(NamedTuple):
    py_name: str
    header: str
    struct: str
    doc: str
    rename: Dict[str, str]            # C++ member -> JSON key
    drop: Tuple[str, ...]             # members not in the JSON
    types: Dict[str, str]             # JSON key -> Python type, where the mapping differs
    extra: Tuple[Tuple[str, str, str, str], ...]  # (key, type, default, doc) not members
    leading: Tuple[Tuple[str, str, str, str], ...] = ()  # extra keys put first


SPECS = [
    Spec("RequestRecord", "record.h", "RequestRecord",
         "One request as strata recorded it (the store's request row; the JSON lines of the CLI).",
         {}, (), {"code": "StatusCodeName"}, (),
         (("type", 'Literal["request"]', '"request"', "always \"request\" (JSON lines)"),)),
    Spec("PrefixBreak", "record.h", "PrefixBreakEvent",
         "A request that reused less of the server's prefix cache than the previous one, and why.",
         {}, (), {"kind": "PrefixBreakKind"}, (),
         (("type", 'Literal["prefix_break"]', '"prefix_break"',
           "always \"prefix_break\" (JSON lines)"),)),
    Spec("CompactionReport", "compaction_policy.h", "CompactionReport",
         "What one compaction did and cost.",
         {"boundary_segment_id": "boundary"}, ("boundary_index", "explanation"),
         {"summarizer": "str"},
         (("expected_saving", "Optional[float]", "None",
           "the chosen set's expected saving, when the policy explained its choice"),
          ("invalidation_cost", "Optional[float]", "None",
           "the chosen set's re-prefill cost, when the policy explained its choice"),
          ("explanation", "str", '""',
           "the policy's explanation as `strata replay --explain` prints it (\"\" when it gave "
           "none, and in the store's events)"))),
    Spec("GrowthPoint", "store.h", "GrowthPoint",
         "Tokens per layer after one turn, as stored for growth curves.",
         {}, (), {"layer_tokens": "Dict[str, int]"},
         (("total_tokens", "int", "0", "the sum of layer_tokens"),)),
    Spec("Usage", "transport.h", "Usage", "Token usage as the server reported it.",
         {}, (), {}, ()),
    Spec("Timings", "transport.h", "Timings",
         "Milliseconds of one call, measured by the client.", {}, (), {}, ()),
    Spec("StoredEvent", "store.h", "StoredEvent",
         "One event of an agent in its store (Store.events()): a compaction, a prefix break or "
         "an application's own.",
         {"payload_json": "payload"}, (), {"payload": "Any", "type": "EventType"}, ()),
]

_INTEGERS = {"int", "int64_t", "int32_t", "size_t", "uint64_t", "uint32_t", "long"}


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def parse_struct(header: str, struct: str) -> List[Member]:
    """The data members of `struct` in `header`, with their comments (the trailing one, else the
    lines above)."""
    text = _strip_comments((INCLUDE / header).read_text())
    match = re.search(r"^struct " + struct + r" \{\n(.*?)^\};", text, re.S | re.M)
    if not match:
        raise SystemExit(f"gen_records.py: no `struct {struct} {{` in {header}")
    body = match.group(1)
    # Nested enums and functions are not members.
    body = re.sub(r"^  enum class \w+ : \w+ \{.*?^  \};\n", "", body, flags=re.S | re.M)
    members: List[Member] = []
    above: List[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            above.append(stripped[2:].strip())
            continue
        m = re.match(r"^\s*([\w:<>, ]+?)\s+(\w+)(?:\s*=\s*([^;]*)|\{\})?;\s*(?://\s*(.*))?$",
                     line)
        if m and "(" not in line.split("//")[0]:
            doc = m.group(4) or " ".join(above)
            members.append(Member(m.group(2), " ".join(m.group(1).split()), doc.strip(),
                                  (m.group(3) or "").strip()))
        above = []
    return members


def parse_enum_names(header: str, enum: str) -> List[str]:
    text = _strip_comments((INCLUDE / header).read_text())
    match = re.search(r"enum class " + enum + r" : \w+ \{(.*?)\};", text, re.S)
    if not match:
        raise SystemExit(f"gen_records.py: no `enum class {enum}` in {header}")
    body = re.sub(r"//[^\n]*", "", match.group(1))
    return re.findall(r"\bk(\w+)\s*=", body)


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower()


def layer_names() -> List[str]:
    text = (INCLUDE / "segment.h").read_text()
    match = re.search(r"enum class Layer : \w+ \{(.*?)\};", text, re.S)
    if not match:
        raise SystemExit("gen_records.py: no `enum class Layer` in segment.h")
    body = re.sub(r"//[^\n]*", "", match.group(1))
    return [_snake(n) for n in re.findall(r"\bk(\w+)\s*=", body) if n != "Count"]


def py_type(cpp: str) -> Tuple[str, str]:
    """(Python type, default when absent) of a C++ member type."""
    optional = re.match(r"std::optional<(.+)>$", cpp)
    if optional:
        inner, _ = py_type(optional.group(1))
        return f"Optional[{inner}]", "None"
    if cpp == "std::string":
        return "str", '""'
    if cpp in _INTEGERS:
        return "int", "0"
    if cpp in ("double", "float"):
        return "float", "0.0"
    if cpp == "bool":
        return "bool", "False"
    vector = re.match(r"std::vector<(.+)>$", cpp)
    if vector:
        inner, _ = py_type(vector.group(1))
        return f"List[{inner}]", "[]"
    raise SystemExit(f"gen_records.py: no Python type for C++ `{cpp}`: add it to py_type()")


def fields_of(spec: Spec) -> List[Field]:
    out = [Field(k, t, d, doc) for k, t, d, doc in spec.leading]
    for member in parse_struct(spec.header, spec.struct):
        if member.name in spec.drop:
            continue
        key = spec.rename.get(member.name, member.name)
        if key in spec.types:
            t = spec.types[key]
            default = {"StatusCodeName": '"OK"', "PrefixBreakKind": '"prefix_changed"',
                       "str": '""', "Any": "None", "EventType": '""'}.get(t, "None")
            if t.startswith("Dict["):
                default = "{}"
        else:
            t, default = py_type(member.cpp_type)
            if t in ("int", "float") and re.match(r"^-?[0-9.]+$", member.initializer):
                default = repr(float(member.initializer)) if t == "float" else \
                    str(int(member.initializer))
            if t == "str" and re.match(r'^"[^"\\]*"$', member.initializer):
                default = member.initializer  # the JSON leaves the default out (e.g. purpose)
        out.append(Field(key, t, default, member.doc))
    out += [Field(k, t, d, doc) for k, t, d, doc in spec.extra]
    return out


def _wrap_comment(text: str, indent: str) -> List[str]:
    words = text.split()
    lines: List[str] = []
    line = indent + "#:"
    for w in words:
        if len(line) + 1 + len(w) > 99:
            lines.append(line)
            line = indent + "#:"
        line += " " + w
    if words:
        lines.append(line)
    return lines


def _wrap_items(items: List[str], indent: str) -> List[str]:
    lines: List[str] = []
    line = indent
    for item in items:
        if len(line) + len(item) + 2 > 99:
            lines.append(line.rstrip())
            line = indent
        line += item + ", "
    lines.append(line.rstrip())
    return lines


CONFIG_SOURCE = REPO / "sdk" / "src" / "agent" / "config.cc"
_READER_TYPES = {"String": "str", "Bool": "bool", "OptBool": "Optional[bool]", "Int": "int",
                 "OptInt": "Optional[int]", "Int32": "int", "Size": "int", "Number": "float",
                 "Strings": "List[str]", "Limit": "BudgetLimit"}
_CALL = re.compile(r"\b\w+\.(" + "|".join(list(_READER_TYPES) + ["Object"]) + r')\("(\w+)"')


def _block(text: str, start: int) -> str:
    """The text inside the braces that open at or after `start`."""
    open_at = text.index("{", start)
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1:i]
    raise SystemExit("gen_records.py: unbalanced braces in config.cc")


def _config_keys(text: str, body: str) -> List[Tuple[str, Any]]:
    """(key, Python type or nested list) of each key the reader calls in `body` read, in order."""
    out: List[Tuple[str, Any]] = []
    pos = 0
    while True:
        m = _CALL.search(body, pos)
        if not m:
            return out
        kind, key = m.group(1), m.group(2)
        if kind != "Object":
            out.append((key, _READER_TYPES[kind]))
            pos = m.end()
            continue
        inner = lambda_body = _block(body, m.end())
        delegated = re.match(r"\s*return (\w+)\(o, ", inner)
        if delegated:  # a reader function of its own (ReadPolicy)
            fn = re.search(r"^Status " + delegated.group(1) + r"\(ObjectReader& o", text, re.M)
            if not fn:
                raise SystemExit(f"gen_records.py: no {delegated.group(1)} in config.cc")
            inner = _block(text, fn.end())
        out.append((key, _config_keys(text, inner)))
        pos = body.index(lambda_body, m.end()) + len(lambda_body)


def config_typeddicts() -> List[str]:
    """TypedDicts of the agent configuration, from the keys AgentConfigFromJson reads."""
    text = CONFIG_SOURCE.read_text()
    fn = re.search(r"^StatusOr<AgentConfig> AgentConfigFromJson\(", text, re.M)
    if not fn:
        raise SystemExit("gen_records.py: no AgentConfigFromJson in config.cc")
    keys = _config_keys(text, _block(text, fn.end()))
    out = ["", "",
           "class BudgetLimit(TypedDict, total=False):",
           '    """A budget limit: ``{"fraction": f}`` of the usable input or ``{"tokens": n}``',
           '    (exactly one)."""', "", "    fraction: float", "    tokens: int"]

    def emit(name: str, doc: str, items: List[Tuple[str, Any]]) -> None:
        for key, value in items:
            if isinstance(value, list):
                emit(key.title() + "Config", f"The configuration's \"{key}\" object.", value)
        out.extend(["", "", f"class {name}(TypedDict, total=False):", f'    """{doc}"""', ""])
        for key, value in items:
            t = key.title() + "Config" if isinstance(value, list) else value
            out.append(f"    {key}: {t}")

    emit("AgentConfig", "The agent configuration (AgentConfigFromJson, sdk/src/agent/config.cc): "
         "every key optional on input; normalize_config() returns every key.", keys)
    return out


def generate() -> str:
    codes = [re.sub(r"(?<!^)([A-Z])", r"_\1", n).upper()
             for n in parse_enum_names("status.h", "StatusCode")]
    kinds = [_snake(n) for n in parse_enum_names("record.h", "Kind")]
    layers = layer_names()
    out: List[str] = [
        '"""The typed forms of strata\'s records. GENERATED by bindings/python/gen_records.py from',
        "the C++ headers (sdk/include/strata/): do not edit; run the generator after changing a",
        'struct (a ctest test fails while this file is not what the headers generate)."""',
        "",
        "from __future__ import annotations",
        "",
        "import copy",
        "import dataclasses",
        "from typing import Any, Dict, List, Literal, Optional, Type, TypedDict, TypeVar",
        "",
        "# The canonical status codes (strata::StatusCode, status.h).",
        "StatusCodeName = Literal[",
        *_wrap_items([f'"{c}"' for c in codes], "    "),
        "]",
        "# PrefixBreakEvent::Kind (record.h).",
        "PrefixBreakKind = Literal[" + ", ".join(f'"{k}"' for k in kinds) + "]",
        "# strata::Layer (segment.h).",
        "LayerName = Literal[" + ", ".join(f'"{n}"' for n in layers) + "]",
        "# StoredEvent.type: the events strata writes, or an application's own.",
        'EventType = str',
        "",
        '_R = TypeVar("_R", bound="_Record")',
        "",
        "",
        "class _Record:",
        '    """Base of the generated records: ``to_dict()`` is the JSON object the record was read',
        '    from (exactly what the C++ API and the store write), ``keys()`` its keys."""',
        "",
        "    _json: Dict[str, Any]",
        "",
        "    @classmethod",
        "    def _from(cls: Type[_R], d: Dict[str, Any]) -> _R:",
        "        values = {}",
        "        for f in dataclasses.fields(cls):",
        "            values[f.name] = d[f.name] if f.name in d else copy.copy(f.metadata[\"absent\"])",
        "        record = cls(**values)",
        '        object.__setattr__(record, "_json", d)',
        "        return record",
        "",
        "    def to_dict(self) -> Dict[str, Any]:",
        '        """The record as the JSON object strata wrote (a copy)."""',
        "        data = getattr(self, \"_json\", None)",
        "        if data is None:",
        "            return {f.name: copy.deepcopy(getattr(self, f.name))",
        "                    for f in dataclasses.fields(self)}",
        "        return copy.deepcopy(data)",
        "",
        "    def keys(self) -> List[str]:",
        "        return list(self.to_dict())",
        "",
        "    def __getitem__(self, key: str) -> Any:",
        '        """``record["key"]``, as for the dicts earlier versions returned (prefer the',
        '        attribute: it is typed)."""',
        "        return self.to_dict()[key]",
        "",
        "",
        "def _absent(value: Any) -> Any:",
        '    return dataclasses.field(metadata={"absent": value})',
        "",
    ]
    for spec in SPECS:
        out += ["", "@dataclasses.dataclass(frozen=True)", f"class {spec.py_name}(_Record):",
                f'    """{spec.doc}', "",
                f'    Generated from ``strata::{spec.struct}`` ({spec.header})."""', ""]
        for f in fields_of(spec):
            if f.doc:
                out += _wrap_comment(f.doc, "    ")
            out.append(f"    {f.name}: {f.py_type} = _absent({f.default})")
        out.append("")
    out += config_typeddicts()
    out.append("")
    out.append("")
    out.append("RECORD_TYPES = (" + ", ".join(s.py_name for s in SPECS) + ")")
    return "\n".join(out).rstrip() + "\n"


def main(argv: List[str]) -> int:
    text = generate()
    if argv[1:] == ["--check"]:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), text.splitlines(True), str(OUTPUT), "generated"))
            print(f"{OUTPUT.relative_to(REPO)} is not what the C++ headers generate: run "
                  "bindings/python/gen_records.py and commit the result")
            return 1
        return 0
    if argv[1:]:
        print(__doc__)
        return 2
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
