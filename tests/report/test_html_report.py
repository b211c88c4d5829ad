"""``arlkit report``: the self-contained HTML report, rendered in a real headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from arlkit.recipes.analyze import analyze_depth, analyze_errors, analyze_flows, analyze_judge, analyze_likelihood, analyze_steps
from arlkit.analysis.errors import ErrorsConfig
from arlkit.analysis.likelihood import LikelihoodConfig
from arlkit.analysis.steps import StepsConfig
from arlkit.cli import main
from arlkit.config import EnvSpec
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.report.html import SECTION_TITLES, write_html_report

BASE, RL = "noisy-oracle:0.6", "noisy-oracle:0.2"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
APT_LINE = "apt-get install -y --no-install-recommends chromium"


@dataclass
class CharScorer:
    """A causal fake scoring model (one token per character)."""

    scale: float = 1.0

    def score(self, messages: Sequence[Sequence[dict]], continuations: Sequence[str]) -> list[list[float]]:
        return [[-self.scale * (0.5 + (ord(c) * 7 + i) % 5 / 10) for i, c in enumerate(text)] for text in continuations]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("report")
    run = root / "eval"
    run_eval(EvalConfig(env=EnvSpec("frozenlake", {"t_max": 20}), policies=(BASE, RL), tasks=5, samples=4,
                        budgets=("50%", "100%"), bootstrap=100), run)  # fmt: skip
    an = root / "analysis"
    analyze_steps([run], BASE, RL, out=an, config=StepsConfig(states=24, actions=4, bootstrap=100), budget=20)
    analyze_depth(steps_dir=an, out=an, bins=4)
    analyze_errors([run], BASE, RL, out=an, config=ErrorsConfig(states=8, actions=2, continuations=1, bootstrap=100), budget=20)
    analyze_likelihood([run], CharScorer(), CharScorer(0.8), out=an, base_label=BASE, rl_label=RL,  # type: ignore[arg-type]
                       config=LikelihoodConfig(max_trajectories=6, successful_only=False, bootstrap=100))
    analyze_judge([run], "random", out=an, states=4, bootstrap=100)
    flows = root / "flows"
    analyze_flows([run], out=flows)
    train = root / "train"
    train.mkdir()
    (train / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "r_multi": 0.1 * s, "r_single": 0.5 - 0.01 * s,
                                                             "note": "x"}) + "\n" for s in range(6)))  # fmt: skip
    return [run, an, flows, train]


@pytest.fixture(scope="module")
def report(sources: list[Path], tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return write_html_report(sources, tmp_path_factory.mktemp("html") / "report.html")


def test_report_holds_every_section(report) -> None:  # type: ignore[no-untyped-def]
    assert report.sections == tuple(SECTION_TITLES) and report.missing == ()
    html = report.path.read_text(encoding="utf-8")
    for key, title in SECTION_TITLES.items():
        assert f'<section id="{key}">' in html and f'href="#{key}"' in html
        assert title.replace("&", "&amp;") in html
    assert html.count("data:image/png;base64,") >= 9 and "<svg" in html
    # self-contained: nothing is fetched from anywhere
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "<link" not in html and "@import" not in html


def test_report_lists_what_it_could_not_include(sources: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "eval_only.html"
    assert main(["report", str(sources[0]), "--out", str(out)]) == 0
    assert "not included" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    assert 'id="passk"' in html and 'id="steps"' not in html and "arlkit analyze steps" in html
    assert main(["report", str(tmp_path / "nothing-here"), "--out", str(out)]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(out)]) == 2


def _chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def test_report_renders_in_headless_chromium(report, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    browser = _chromium()
    if browser is None:
        pytest.skip(f"no Chromium on this machine (looked for {', '.join(CHROMIUM_NAMES)}); install it with: {APT_LINE}")
    profile = tmp_path / "chromium-profile"
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
        f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
        "--dump-dom", report.path.resolve().as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == [], console  # the page logs nothing: no errors, no warnings
    body = re.search(r"<body([^>]*)>", dom)
    assert body is not None, dom[:500]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))
    assert attrs.get("data-rendered") == "ok"  # the load handler ran: the page finished loading
    assert attrs.get("data-broken-images") == "0" and int(attrs["data-images"]) >= 9
    assert attrs.get("data-missing-sections") == ""
    html_tag = re.search(r"<html([^>]*)>", dom)
    assert html_tag is not None and "data-errors" not in html_tag.group(1)  # no script or resource error was caught
    for key in report.sections:
        assert f'<section id="{key}">' in dom
    assert dom.count("<svg") >= 2
