"""Load: 200 sandboxed runs, 8 at a time, leave no process, descriptor or temp folder behind."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from arlkit.sandbox import Sandbox

PROGRAMS = (
    ("print(sum(range(100)))", "ok"),
    ("import sys\nsys.exit(2)", "error"),
    ("print('x' * 50000)", "output_limit"),
    ("import os\nif os.fork() == 0:\n    import time\n    time.sleep(30)\nprint('done')", "ok"),
)


def test_200_runs_8_at_a_time_leak_nothing(sbx, private_tmp: str) -> None:  # type: ignore[no-untyped-def]
    level = sbx.working_levels[-1]
    sandbox = Sandbox(sbx.config(level, max_output_bytes=20_000))
    before = sbx.footprint(private_tmp)

    def one(i: int) -> tuple[str, str]:
        source, expected = PROGRAMS[i % len(PROGRAMS)]
        if level == "none" and "fork" in source:
            source, expected = PROGRAMS[0]  # an escaped child is not containable at level none
        return sandbox.run_python(source).outcome, expected

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(one, range(200)))
    assert [got for got, _ in outcomes] == [want for _, want in outcomes]
    sbx.assert_no_leak(before, private_tmp)
