"""A conversation's tools file: OpenAI's `tools` read by the same code as the API's (so both
refuse the same things, with the field named), each tool's optional local command (an argument
vector, never a shell line), and a command's output bounded as the tool's reply."""

from __future__ import annotations

import json

import pytest

from workbench.engine.tools.declared import ToolDeclarationError, declared_tools
from workbench.ui.chat.tools_file import (
    COMMAND_KEY,
    ToolsFileError,
    command_line,
    pretty_arguments,
    read_tools_file,
    result_text,
)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "required": ["city"],
                   "properties": {"city": {"type": "string"}}}}}
CLOCK = {"type": "function", "function": {"name": "get_time"},
         COMMAND_KEY: ["date", "+%H:%M"]}


def write(tmp_path, value) -> str:
    path = tmp_path / "tools.json"
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def test_a_tools_file_declares_tools_and_their_commands(tmp_path):
    read = read_tools_file(write(tmp_path, [WEATHER, CLOCK]))
    assert [t.name for t in read.tools] == ["get_weather", "get_time"]
    assert read.tools[0].parameters["required"] == ["city"]
    assert read.commands == {"get_time": ("date", "+%H:%M")}
    # The extension key is the window's: the model's template sees OpenAI's declaration only.
    assert COMMAND_KEY not in json.dumps(read.tools[1].declared)
    # A request body's {"tools": [...]} reads the same.
    assert read_tools_file(write(tmp_path, {"tools": [WEATHER]})).tools == read.tools[:1]


@pytest.mark.parametrize(("content", "words"), [
    ("", "is empty"),
    ("[{", "is not JSON"),
    ({"type": "function"}, "must be an array"),
    ([{"type": "function", "function": {"name": "has space"}}], "tools[0].function.name"),
    ([WEATHER, WEATHER], "two tools have the same name"),
    ([{"type": "function", "function": {"name": "x", "parameters": {
        "type": "string", "format": "no-such-format"}}}], "no-such-format"),
    ([{**CLOCK, COMMAND_KEY: "date +%H"}], "list of non-empty strings"),
    ([{**CLOCK, COMMAND_KEY: []}], "list of non-empty strings"),
])
def test_a_bad_tools_file_is_a_clear_error(tmp_path, content, words):
    with pytest.raises(ToolsFileError, match=words.replace("[", r"\[").replace("]", r"\]")):
        read_tools_file(write(tmp_path, content))


def test_a_tools_file_that_is_no_file_is_refused_before_it_is_opened(tmp_path):
    with pytest.raises(ToolsFileError, match="not a text file"):
        read_tools_file(tmp_path)
    with pytest.raises(ToolsFileError, match="cannot read"):
        read_tools_file(tmp_path / "missing.json")


def test_the_api_and_the_file_share_one_reader():
    with pytest.raises(ToolDeclarationError) as caught:
        declared_tools([WEATHER, {"type": "function", "function": {"name": ""}}])
    assert caught.value.param == "tools[1].function.name"


def test_a_call_runs_its_command_with_the_arguments_last_and_output_is_bounded():
    assert command_line(("python3", "w.py"), '{"city": "Oslo; rm -rf /"}') == [
        "python3", "w.py", '{"city": "Oslo; rm -rf /"}']  # one argument: no shell sees it
    assert result_text(b"sunny \xff") == "sunny \ufffd"
    cut = result_text(b"x" * 50, limit=10)
    assert cut.startswith("x" * 10) and "40 more characters" in cut
    assert pretty_arguments('{"city": "Oslo"}') == '{\n  "city": "Oslo"\n}'
