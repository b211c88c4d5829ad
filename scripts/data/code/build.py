"""Build ``src/arlkit/data/code/problems.json`` (arlkit's shipped code tasks) from the definitions in this folder.

Run from the repository root:  ``.venv/bin/python scripts/data/code/build.py``

For every problem: the inputs (public, hand-picked hidden, seeded random) are run through the
reference solution in the sandbox, with the same harness the environment uses; the outputs become
the expected outputs. The ``brute`` solution, when given, must agree on every small input. The
output file is deterministic: the same definitions always give the same bytes.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from problems_easy import PROBLEMS as EASY  # noqa: E402
from problems_hard import PROBLEMS as HARD  # noqa: E402
from problems_medium import PROBLEMS as MEDIUM  # noqa: E402
from spec import P  # noqa: E402

from arlkit.envs.code.data import CodeTest  # noqa: E402
from arlkit.envs.code.grading import run_tests  # noqa: E402
from arlkit.sandbox import Sandbox, SandboxConfig  # noqa: E402

OUT = HERE.parents[2] / "src" / "arlkit" / "data" / "code" / "problems.json"


def _probe_test(p: P, inp: object) -> CodeTest:
    if p.fn:
        return CodeTest("call", fn_name=p.fn, args=tuple(inp), expected=None)  # type: ignore[arg-type]
    return CodeTest("stdio", input=str(inp))


def _outputs(sandbox: Sandbox, p: P, program: str, inputs: list[object], what: str) -> list[object]:
    reports, outcome, _ = run_tests(sandbox, program, [_probe_test(p, i) for i in inputs], test_timeout_s=20, budget_s=600, max_test_output=1 << 22)
    out = []
    for k, r in enumerate(reports):
        if r is None or r.get("status") != "ok":
            raise SystemExit(f"{p.id}: the {what} failed on input {k} ({outcome}): {str(r)[-800:]}")
        out.append(r["value"] if p.fn else r["stdout"])
    return out


def _example(p: P, inp: object, out: object) -> str:
    if p.fn:
        args = ", ".join(repr(a) for a in inp)  # type: ignore[union-attr]
        return f"{p.fn}({args}) returns {out!r}"
    return f"Input:\n{str(inp).rstrip()}\nOutput:\n{str(out).rstrip()}"


def build_entry(sandbox: Sandbox, p: P) -> dict[str, object]:
    rng = random.Random(f"arlkit-code:{p.id}")
    randoms = [p.gen(rng, i) for i in range(p.n_random)] if p.gen else []
    inputs = list(p.public) + list(p.hidden) + randoms
    outputs = _outputs(sandbox, p, p.reference, inputs, "reference")
    if p.brute:
        small = [k for k, i in enumerate(inputs) if len(json.dumps(i)) <= p.brute_limit]
        brute = _outputs(sandbox, p, p.brute, [inputs[k] for k in small], "brute-force check")
        for k, b in zip(small, brute):
            if b != outputs[k]:
                raise SystemExit(f"{p.id}: reference and brute force disagree on input {k}: {outputs[k]!r} vs {b!r}")

    def test(k: int) -> dict[str, object]:
        if p.fn:
            return {"kind": "call", "fn_name": p.fn, "args": list(inputs[k]), "expected": outputs[k]}
        return {"kind": "stdio", "input": inputs[k], "output": outputs[k]}

    n_pub = len(p.public)
    examples = "\n\n".join(_example(p, inputs[k], outputs[k]) for k in range(n_pub))
    statement = p.statement.strip() + ("\n\nExamples:\n\n" + examples if n_pub else "")
    return {
        "id": p.id,
        "title": p.title,
        "difficulty": p.difficulty,
        "statement": statement,
        "starter_code": "",
        "reference": p.reference.strip() + "\n",
        "public_tests": [test(k) for k in range(n_pub)],
        "hidden_tests": [test(k) for k in range(len(inputs))],
    }


def main() -> None:
    problems = EASY + MEDIUM + HARD
    ids = [p.id for p in problems]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise SystemExit(f"duplicate ids: {sorted(duplicates)}")
    only = set(sys.argv[1:])
    sandbox = Sandbox(SandboxConfig(wall_time_s=700, cpu_time_s=700, memory_mb=1024))
    entries = []
    for p in problems:
        if only and p.id not in only:
            continue
        entries.append(build_entry(sandbox, p))
        print(f"built {p.id} ({p.difficulty}, {len(entries[-1]['hidden_tests'])} tests)", flush=True)  # type: ignore[arg-type]
    if only:
        return
    # Compact JSON, one problem per line: small on disk, readable in a diff.
    lines = ",\n".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in entries)
    OUT.write_text('{"format":"arlkit-code-v1","problems":[\n' + lines + "\n]}\n", encoding="utf-8")
    print(f"wrote {len(entries)} problems to {OUT}")


if __name__ == "__main__":
    main()
