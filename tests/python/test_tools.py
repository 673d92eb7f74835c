"""Tools from type hints and docstrings: @agent.tool on a typed function builds the JSON schema the
way the Agents SDK's function_tool does, converts the model's arguments to the annotated types,
awaits async handlers, and refuses a type it cannot express, naming it."""

import asyncio
import dataclasses
import enum
import json
from typing import Any, Dict, List, Literal, Optional, Tuple, TypedDict

import pytest

import strata


class Color(enum.Enum):
    """A colour."""

    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    """A point on the grid."""

    x: int
    y: int


@dataclasses.dataclass
class Options:
    """How to search.

    Attributes:
        depth: how many levels to descend
        names: file names to look for
    """

    depth: int
    names: List[str] = dataclasses.field(default_factory=list)


def list_dir(path: str = ".", recursive: bool = False) -> str:
    """Lists the files of a directory.

    Args:
        path: the directory, relative to the
            repository root.
        recursive: whether to list subdirectories too.
    """
    return path


def test_the_schema_of_the_issues_example_names_each_parameter_with_its_default():
    schema = strata.function_schema(list_dir)
    assert schema == {
        "description": "Lists the files of a directory.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "default": ".",
                         "description": "the directory, relative to the repository root."},
                "recursive": {"type": "boolean", "default": False,
                              "description": "whether to list subdirectories too."},
            },
            "required": [],
            "additionalProperties": False,
        },
    }


def test_every_supported_type_has_its_json_schema():
    def search(query: str, limit: int, score: float, exact: bool, tags: List[str],
               weights: Dict[str, float], color: Color, mode: Literal["fast", "full"],
               where: Point, options: Options, pair: Tuple[int, str], anything: Any,
               note: Optional[str] = None, level: "int | None" = None) -> str:
        """Searches.

        :param query: what to look for
        :param limit: at most this many results
        """
        return ""

    p = strata.function_schema(search)["parameters"]
    props = p["properties"]
    assert p["required"] == ["query", "limit", "score", "exact", "tags", "weights", "color",
                             "mode", "where", "options", "pair", "anything"]
    assert props["query"] == {"type": "string", "description": "what to look for"}
    assert props["limit"] == {"type": "integer", "description": "at most this many results"}
    assert props["score"] == {"type": "number"}
    assert props["exact"] == {"type": "boolean"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["weights"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["color"] == {"enum": ["red", "blue"], "type": "string", "description": "A colour."}
    assert props["mode"] == {"enum": ["fast", "full"], "type": "string"}
    assert props["where"] == {"type": "object", "description": "A point on the grid.",
                              "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                              "required": ["x", "y"], "additionalProperties": False}
    assert props["options"]["required"] == ["depth"]
    assert props["options"]["properties"]["depth"] == {
        "type": "integer", "description": "how many levels to descend"}
    assert props["options"]["properties"]["names"]["items"] == {"type": "string"}
    assert props["pair"] == {"type": "array", "prefixItems": [{"type": "integer"},
                                                              {"type": "string"}],
                             "minItems": 2, "maxItems": 2}
    assert props["anything"] == {}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["level"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}


def test_a_numpy_style_docstring_gives_the_descriptions_too():
    def grep(pattern: str) -> str:
        """Finds lines.

        Parameters
        ----------
        pattern : str
            A regular expression.
        """
        return pattern

    schema = strata.function_schema(grep)
    assert schema["description"] == "Finds lines."
    assert schema["parameters"]["properties"]["pattern"]["description"] == "A regular expression."


@pytest.mark.parametrize("annotation, shown", [(bytes, "bytes"), (complex, "complex"),
                                               (Dict[int, str], "Dict[int, str]")])
def test_a_type_without_a_json_schema_form_is_refused_naming_the_parameter(annotation, shown):
    def tool(value):  # type: ignore[no-untyped-def]
        return value

    tool.__annotations__ = {"value": annotation}
    agent = strata.Agent.create({"identity": {"id": "t"}})
    agent.set_system_prompt("s")
    with pytest.raises(TypeError) as e:
        agent.tool(tool)
    assert "parameter 'value'" in str(e.value) and shown in str(e.value)
    assert "@agent.tool(name, schema)" in str(e.value)
    names = [t["function"]["name"] for t in agent.request().get("tools", [])]
    assert "tool" not in names  # nothing registered


def test_star_args_are_refused():
    def tool(*paths: str) -> str:
        return ""

    with pytest.raises(TypeError, match="\\*args or \\*\\*kwargs"):
        strata.function_schema(tool)


def test_the_decorator_sends_the_built_schema_and_converts_the_arguments(start_sim):
    arguments = {"color": "blue", "options": {"depth": 2, "names": ["a.py"]},
                 "pair": [3, "x"]}
    sim = start_sim([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "paint", "arguments": json.dumps(arguments)}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "..."},
        {"role": "assistant", "content": "done"},
    ])
    agent = strata.Agent.create({"identity": {"id": "typed"},
                                 "endpoint": {"base_url": sim.base_url}})
    received: List[Any] = []

    @agent.tool
    def paint(color: Color, options: Options, pair: Tuple[int, str], dry_run: bool = True) -> Dict:
        """Paints.

        Args:
            color: the colour to use
        """
        received.extend([color, options, pair, dry_run])
        return {"painted": color, "options": options}

    result = agent.run("go")
    assert result.answer == "done" and result.tool_errors == 0
    assert received == [Color.BLUE, Options(depth=2, names=["a.py"]), (3, "x"), True]
    tool = next(t["function"] for t in agent.request()["tools"]
                if t["function"]["name"] == "paint")
    assert tool["name"] == "paint" and tool["description"] == "Paints."
    assert tool["parameters"]["properties"]["color"]["description"] == "the colour to use"
    assert tool["parameters"]["required"] == ["color", "options", "pair"]
    tool_message = next(m for m in agent.messages() if m["role"] == "tool")
    assert json.loads(tool_message["content"]) == {
        "painted": "blue", "options": {"depth": 2, "names": ["a.py"]}}


SCRIPT_ONE_CALL = [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "fetch", "arguments": "{\"url\": \"u\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "..."},
    {"role": "assistant", "content": "fetched"},
]


def test_an_async_handler_is_awaited_by_run(start_sim):
    sim = start_sim(SCRIPT_ONE_CALL)
    agent = strata.Agent.create({"identity": {"id": "a"}, "endpoint": {"base_url": sim.base_url}})

    @agent.tool
    async def fetch(url: str) -> str:
        await asyncio.sleep(0)
        return f"content of {url}"

    result = agent.run("go")
    assert result.tool_errors == 0
    assert next(m for m in agent.messages() if m["role"] == "tool")["content"] == "content of u"


def test_an_async_handler_runs_on_the_loop_of_run_async(start_sim):
    sim = start_sim(SCRIPT_ONE_CALL)
    agent = strata.Agent.create({"identity": {"id": "a"}, "endpoint": {"base_url": sim.base_url}})
    loops = []

    @agent.tool
    async def fetch(url: str) -> str:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return "async " + url

    async def main() -> Any:
        result = await agent.run_async("go")
        return result, asyncio.get_running_loop()

    result, loop = asyncio.run(main())
    assert result.answer == "fetched" and result.tool_errors == 0
    assert loops == [loop]  # the caller's loop, where its other coroutines and resources live
    assert next(m for m in agent.messages() if m["role"] == "tool")["content"] == "async u"
