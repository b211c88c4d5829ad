"""Steps and requests that could run without bound, each of which must end by its deadline.

Families: ``math-hangs`` (final answers whose check runs away in sympy or a reasoning-gym scorer:
huge binomials, Gamma values, factorials, power towers, giant integers, deep nesting, on shipped and
generated problems), ``bfcl-hangs`` (every BFCL function called with hostile numbers, long strings
and long lists, built from the functions' own docs, so the family covers calls nobody listed) and
``slow-servers`` (servers that trickle their headers or body, stream forever or never answer, for
requests, the model check at construction and whole rollouts).

A case that hangs in C holds the interpreter lock of its whole process, so the cases run in a child
process (this file run as a script) that reports each case as a JSON line; a case that does not
report within :data:`CASE_LIMIT_S` is not contained, and the child is restarted after it.
"""

from __future__ import annotations

import json
import math
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # the child: scripts/ on the path, as when probe_hardening.py runs
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probes import Family  # noqa: E402

DEADLINE_S = 1.0  # the deadline every case runs under (score, call, request)
MARGIN_S = 20.0  # what a contained case may take beyond its bound (shared, noisy machines)
CASE_LIMIT_S = 90.0  # the parent gives up on a case after this long and restarts the child

MATH_EXPRESSIONS = (
    "\\binom{10000000}{5000000}", "\\Gamma(10000000)", "\\frac{\\Gamma(10000000)}{\\Gamma(9999999)}",
    "\\binom{\\binom{100}{50}}{25}", "\\Gamma(\\Gamma(20))", "10000000!", "(10^{8})!", "10^{10^{10}}",
    "9^{9^{9^{9}}}", "2^{2^{2^{2^{2^{2}}}}}", "1" * 5000, "-" + "9" * 100_000, "\\frac{1}{" + "7" * 4500 + "}",
    "{" * 3000 + "1" + "}" * 3000, "(" * 3000 + "1" + ")" * 3000, "\\sqrt{" * 500 + "2" + "}" * 500,
    "\\frac{" * 300 + "1" + "}{2}" * 300, "\\sum_{k=1}^{10^{12}} k", "\\prod_{k=1}^{10000000} k",
    "\\lfloor \\pi \\cdot 10000000000000 \\rfloor", "\\binom{10000000}{5000000} \\cdot \\binom{9999999}{4999999}",
    "\\Gamma(10000000) - \\Gamma(10000001) + 1", "\\frac{\\binom{20000000}{10000000}}{3}",
    "\\operatorname{lcm}(1, 2, " + ", ".join(map(str, range(3, 400))) + ")",
)
HOSTILE_NUMBERS = (-1_000_000_000, 10**18, -(10**18), 10**3999, 1e308, -1e999)  # 1e999 is inf


# -- cases: (name, arguments) lists, the same in the parent and the child ---------------------------
def _math_cases() -> list[tuple[str, list[Any]]]:
    from arlkit.envs import make

    shipped = make("math-tir", task_set="shipped").tasks("test", 1)
    generated = make("math-tir").tasks("test", 10)  # one problem of each default family
    return [(f"{t.payload['source']}: {expr[:50]}", [t.task_id, t.payload, expr])
            for t in shipped + generated for expr in MATH_EXPRESSIONS]


def _argument(kind: str | None) -> Any:
    return {"string": "x", "array": ["x"], "dict": {}, "boolean": True}.get(kind or "", "x")


def _bfcl_cases() -> list[tuple[str, list[Any]]]:
    from arlkit.envs import make
    from arlkit.envs.bfcl import function_docs
    from arlkit.envs.bfcl.backend import MULTI_TURN_CLASSES

    entries = make("bfcl").entries
    cases = []
    for class_name in MULTI_TURN_CLASSES:
        entry = next(e for e in entries if class_name in e.classes)
        for doc in function_docs(class_name):
            types = {k: v.get("type") for k, v in doc["parameters"]["properties"].items()}
            numeric = [k for k, t in types.items() if t in ("integer", "float", "number")]
            variants = [({name: value}, filler) for name in numeric for value in HOSTILE_NUMBERS for filler in (1, 7)]
            for kind, big in (("string", "x" * 12_000), ("array", list(range(2_000)))):
                if kind in types.values():
                    variants.append(({k: big for k, t in types.items() if t == kind}, 7))
            for chosen, filler in variants:
                arguments = {k: chosen.get(k, filler if k in numeric else _argument(t)) for k, t in types.items()}
                text = ", ".join(f"{k}={'-1e999' if v == -math.inf else repr(v)}" for k, v in arguments.items())
                call = f"{doc['name']}({text})"
                cases.append((f"{class_name}.{call[:90]}", [entry.entry_id, call]))
    return cases


def _server_cases() -> list[tuple[str, list[Any]]]:
    cases: list[tuple[str, list[Any]]] = []
    for kind in ("headers", "body", "stream", "silent"):
        cases.append((f"{kind}: requests, timeout 1 s, 1 retry", ["generate", kind, 1.0, 1]))
        cases.append((f"{kind}: requests, timeout 1 s, no retry", ["generate", kind, 1.0, 0]))
        cases.append((f"{kind}: model check at construction", ["construct", kind, 1.0, 0]))
        cases.append((f"{kind}: rollouts end as policy errors", ["rollouts", kind, 1.0, 1]))
    cases.append(("stream: --request-timeout 5 --max-retries 1", ["generate", "stream", 5.0, 1]))
    return cases


# -- running one case in the child; each returns why it was not contained, or "" ------------------
_ENVS: dict[str, Any] = {}


def _env(name: str, **args: Any) -> Any:
    from arlkit.envs import make

    key = f"{name}{sorted(args.items())}"
    if key not in _ENVS:
        _ENVS[key] = make(name, **args)
    return _ENVS[key]


def _math_case(task_id: str, payload: dict[str, Any], expr: str) -> str:
    from arlkit.envs.protocol import Task

    task_set = "shipped" if payload["source"] == "arlkit" else "generated"
    env = _env("math-tir", task_set=task_set, score_timeout_s=DEADLINE_S)
    env.reset(Task(task_id, payload), 0)
    start = time.monotonic()
    result = env.step(f"\\boxed{{{expr}}}")
    elapsed = time.monotonic() - start
    if result.success:
        return "scored correct"
    return f"the step took {elapsed:.1f} s" if elapsed > DEADLINE_S + MARGIN_S else ""


def _bfcl_case(entry_id: str, call: str) -> str:
    from arlkit.envs.protocol import Task

    env = _env("bfcl", call_timeout_s=DEADLINE_S)
    entry = next(e for e in env.entries if e.entry_id == entry_id)
    env.reset(Task(entry.entry_id, entry.payload()), 0)
    start = time.monotonic()
    result = env.step(call)
    elapsed = time.monotonic() - start
    after = env.step(entry.ground_truth[0][0] if entry.ground_truth[0] else "finish_turn()")
    if elapsed > DEADLINE_S + MARGIN_S:
        return f"the step took {elapsed:.1f} s: {result.observation[:120]!r}"
    return "" if after.valid else f"the next step is invalid: {after.observation[:120]!r}"


def _server_case(mode: str, kind: str, timeout: float, retries: int) -> str:
    from arlkit.envs import make
    from arlkit.policies import PolicyError, Request, SamplingConfig
    from arlkit.policies.loopback import ScriptedServer, Stall
    from arlkit.policies.openai_backend import OpenAIConfig, OpenAIPolicy
    from arlkit.rollout import make_jobs, run_rollouts

    config = OpenAIConfig(timeout=timeout, max_retries=retries, backoff=0.0, check_model=mode == "construct")
    bound = timeout * (retries + 1) + MARGIN_S
    sampling = SamplingConfig(max_new_tokens=8)
    stall = Stall(kind, interval_s=0.2, limit_s=CASE_LIMIT_S * 2)  # type: ignore[arg-type]
    with ScriptedServer(lambda body: "<action>Left</action>", stall=stall) as server:
        start = time.monotonic()
        try:
            policy = OpenAIPolicy("scripted", server.base_url, sampling, config)
        except PolicyError as exc:
            return "" if mode == "construct" and time.monotonic() - start < bound else f"PolicyError: {exc}"
        try:
            if mode == "rollouts":
                env = lambda: make("frozenlake", size=4, t_max=4)  # noqa: E731
                ended = {t.ended_by for t in run_rollouts(env, make_jobs(env().tasks("test", 2), 2, 4, seed=0), policy)}
                failed = ended == {"policy_error"}
            else:
                messages = [{"role": "user", "content": "Move."}]
                failed = all(r.error for r in policy.generate([Request(messages, seed, 0) for seed in range(3)]))
        finally:
            policy.close()
        elapsed = time.monotonic() - start
    if not failed:
        return "a request succeeded against a server that never finishes a reply"
    return f"took {elapsed:.1f} s (bound {bound:g} s)" if elapsed > bound else ""


_CASES: dict[str, Callable[[], list[tuple[str, list[Any]]]]] = {
    "math-hangs": _math_cases, "bfcl-hangs": _bfcl_cases, "slow-servers": _server_cases,
}
_RUN: dict[str, Callable[..., str]] = {"math-hangs": _math_case, "bfcl-hangs": _bfcl_case, "slow-servers": _server_case}
_TITLES = {
    "math-hangs": "math-hangs: final answers whose check runs away, stopped at the score deadline",
    "bfcl-hangs": "bfcl-hangs: every BFCL function with hostile numbers, strings, lists, stopped at the call deadline",
    "slow-servers": "slow-servers: trickling, endless and silent servers, ended by the request deadline",
}


def _child(family: str, first: int) -> None:
    """Run the family's cases from ``first`` on, one JSON line each: ``[index, why not contained]``."""
    for index, (_, arguments) in enumerate(_CASES[family]()):
        if index < first:
            continue
        try:
            why = _RUN[family](*arguments)
        except Exception as exc:  # a probe counts crashes, it does not stop at one
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
        print(json.dumps([index, why]), flush=True)


def _probe(family_name: str) -> Callable[[], Iterator[Family]]:
    def run() -> Iterator[Family]:
        family = Family(_TITLES[family_name])
        cases = _CASES[family_name]()
        index = 0
        while index < len(cases):
            child = subprocess.Popen([sys.executable, __file__, family_name, str(index)], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
            assert child.stdout is not None
            while index < len(cases):
                ready, _, _ = select.select([child.stdout], [], [], CASE_LIMIT_S)
                line = child.stdout.readline() if ready else ""
                if not line:
                    why = f"did not end within {CASE_LIMIT_S:g} s" if not ready else "the probe's child died"
                    family.check(cases[index][0], False, why)
                    index += 1
                    break
                done, why = json.loads(line)
                family.check(cases[done][0], not why, why)
                index = done + 1
            child.kill()
            child.wait()
        yield family

    return run


FAMILIES = {name: _probe(name) for name in _CASES}

if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
