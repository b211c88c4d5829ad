"""Parsing tool calls with ``ast``: literal arguments only, nothing is ever evaluated."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.envs.tools.api_base import ArgumentError
from arlkit.envs.tools.apis import specs_for
from arlkit.envs.tools.calls import Call, CallSyntaxError, format_call, parse_calls
from arlkit.envs.tools.checks import bind


def test_keyword_positional_and_literal_values() -> None:
    (call,) = parse_calls("f(1, -2.5, 'x', key=[1, (2, 3)], d={'a': None, 'b': True})")
    assert call == Call("f", (1, -2.5, "x"), (("key", [1, [2, 3]]), ("d", {"a": None, "b": True})))


@pytest.mark.parametrize(
    "text",
    ["ls()\ncd(folder='a')", "ls(); cd(folder='a')", "[ls(), cd(folder='a')]", "```python\nls()\ncd(folder='a')\n```"],
)
def test_several_calls_in_the_accepted_layouts(text: str) -> None:
    assert [c.name for c in parse_calls(text)] == ["ls", "cd"]


REJECTED = [
    ("__import__('os').system('touch /tmp/arlkit_pwned')", "attribute chains are not allowed"),
    ("os.system('ls')", "attribute chains are not allowed"),
    ("cat(file_name=__import__('os').getcwd())", "arguments must be literal values, found a nested call"),
    ("cat(file_name=open('/etc/passwd').read())", "found a nested call"),
    ("mean(numbers=(lambda: [1])())", "found a nested call"),
    ("mean(numbers=lambda: 1)", "found a lambda"),
    ("mean(numbers=[x for x in range(10**9)])", "found a comprehension"),
    ("mean(numbers=list(range(3)))", "found a nested call"),
    ("mean(*[[1, 2]])", "starred (*) arguments are not allowed"),
    ("mean(**{'numbers': [1]})", "'**' arguments are not allowed"),
    ("cat(file_name=secret)", "found a variable name"),
    ("add(a=1 + 1, b=2)", "found an arithmetic expression"),
    ("cat(file_name=f'{1}')", "found an f-string"),
    ("mean(numbers={1, 2})", "found a set"),
    ("cat(file_name=b'x')", "unsupported literal bytes"),
    ("ls(a=true)", "write True"),
    ("x = ls()", "found a statement of type Assign"),
    ("import os", "found a statement of type Import"),
    ("ls() if True else rm(file_name='a')", "expected a function call, found a conditional expression"),
    ("ls", "expected a function call, found a variable name"),
    ("ls(", "not valid call syntax"),
    ("", "no function call found"),
    ("[]", "the list of calls is empty"),
    ("cat(file_name={**{}})", "'**' inside a dict is not allowed"),
    ("cat(file_name={1: 'a'})", "dict keys must be strings"),
    ("cat(file_name=-'a')", "a sign is only allowed in front of a number"),
    ("f(" + "[" * 50 + "]" * 50 + ")", "nested too deeply"),
    ("(" * 300 + ")" * 300, "not valid call syntax"),
    ("x" * 5000, "characters long; the limit is 4000"),
    ("ls()\x00", "not valid call syntax"),
    # ast.parse accepts a repeated keyword (Python's compiler refuses it): the call would keep the last value
    ("cd(folder='a', folder='b')", "keyword argument 'folder' is given twice in cd()"),
    ("[ls(), mv(source='a', destination='b', source='c')]", "keyword argument 'source' is given twice in mv()"),
]


@pytest.mark.parametrize(("text", "message"), REJECTED)
def test_everything_but_literal_calls_is_rejected(text: str, message: str) -> None:
    with pytest.raises(CallSyntaxError, match=None) as info:
        parse_calls(text)
    assert message in str(info.value)


def test_binding_rejects_unknown_functions_and_wrong_types() -> None:
    specs = specs_for(["FileSystem", "Calculator"])
    with pytest.raises(ArgumentError, match="unknown function 'eval'; the available functions are: "):
        bind(parse_calls("eval('1')")[0], specs)
    with pytest.raises(ArgumentError, match="expected a string, got 3"):
        bind(parse_calls("cat(file_name=3)")[0], specs)
    with pytest.raises(ArgumentError, match="expected a list, got str"):
        bind(parse_calls("mean(numbers='1,2')")[0], specs)
    with pytest.raises(ArgumentError, match=r"argument 'numbers'\[1\]: expected a number, got 'x'"):
        bind(parse_calls("mean(numbers=[1, 'x'])")[0], specs)
    with pytest.raises(ArgumentError, match="expected True or False, got 1"):
        bind(parse_calls("ls(a=1)")[0], specs)
    with pytest.raises(ArgumentError, match="expected one of 'l', 'w', 'c'"):
        bind(parse_calls("wc(file_name='a', mode='x')")[0], specs)
    with pytest.raises(ArgumentError, match="missing the required argument 'file_name'"):
        bind(parse_calls("cat()")[0], specs)
    with pytest.raises(ArgumentError, match="unexpected argument 'path'"):
        bind(parse_calls("cat(path='a')")[0], specs)
    with pytest.raises(ArgumentError, match="takes 1 argument"):
        bind(parse_calls("cat('a', 'b')")[0], specs)
    with pytest.raises(ArgumentError, match="two values for argument 'file_name'"):
        bind(parse_calls("cat('a', file_name='b')")[0], specs)
    with pytest.raises(ArgumentError, match="expected an integer, got True"):
        bind(parse_calls("tail(file_name='a', lines=True)")[0], specs)


def test_binding_converts_and_canonicalises() -> None:
    specs = specs_for(["FileSystem", "Calculator"])
    call = bind(parse_calls("mean([1, 2.5])")[0], specs)
    assert call.arguments == {"numbers": [1.0, 2.5]} and call.canonical == "mean(numbers=[1.0, 2.5])"
    assert bind(parse_calls("ls()")[0], specs).canonical == bind(parse_calls("ls(a=False)")[0], specs).canonical
    assert format_call("cd", {"folder": "it's"}) == """cd(folder="it's")"""


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parsing_never_raises_anything_else(text: str) -> None:
    try:
        calls = parse_calls(text)
    except CallSyntaxError:
        return
    assert all(isinstance(c, Call) and c.name.isidentifier() for c in calls)


def test_python_itself_refuses_what_the_parser_refuses_as_a_repeated_keyword() -> None:
    with pytest.raises(SyntaxError, match="repeated"):
        compile("cd(folder='a', folder='b')", "<action>", "exec")
    assert parse_calls("cd(folder='a', other='b')")[0].kwargs == (("folder", "a"), ("other", "b"))


def test_a_repeated_keyword_is_an_invalid_action_with_no_side_effect() -> None:
    from arlkit.envs import make

    env = make("tools")
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    key = env.state_key()
    result = env.step("cd(folder='a', folder='b')")
    assert (result.valid, result.done, result.reward) == (False, False, 0.0)
    assert "keyword argument 'folder' is given twice in cd()" in result.observation
    assert env.state_key() == key
