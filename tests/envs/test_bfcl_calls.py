"""Parsing tool calls with ``ast``: literal arguments only, nothing is ever evaluated."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.envs.bfcl.calls import Call, CallSyntaxError, format_call, parse_calls


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
    ("power(base=0x" + "f" * 3400 + ", exponent=1)", "an integer literal has more than 4000 digits"),  # not printable
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


def test_format_call_writes_keyword_literals() -> None:
    assert format_call("cd", {"folder": "it's"}) == """cd(folder="it's")"""
    assert parse_calls(format_call("mean", {"numbers": [1, 2.5]}))[0] == Call("mean", (), (("numbers", [1, 2.5]),))


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
    pytest.importorskip("bfcl_eval", reason="the bfcl extra is not installed (pip install --no-deps bfcl-eval mpmath)")
    from arlkit.envs import make

    env = make("bfcl")
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    key = env.state_key()
    result = env.step("cd(folder='a', folder='b')")
    assert (result.valid, result.done, result.reward) == (False, False, 0.0)
    assert "keyword argument 'folder' is given twice in cd()" in result.observation
    assert env.state_key() == key
