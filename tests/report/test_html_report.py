"""``arlkit report``: the self-contained HTML report, rendered in a real headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from arlkit.analysis.errors import ErrorsConfig
from arlkit.analysis.likelihood import LikelihoodConfig
from arlkit.analysis.steps import StepsConfig
from arlkit.cli import main
from arlkit.config import EnvSpec
from arlkit.metrics import paired_bootstrap_difference
from arlkit.metrics.passkt import per_task_pass
from arlkit.recipes.stability import analyze_stability
from arlkit.recipes.analyze import (
    analyze_depth,
    analyze_errors,
    analyze_flows,
    analyze_judge,
    analyze_likelihood,
    analyze_steps,
)
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.report.eval_sections import EvalRun, group_eval_runs
from arlkit.report.html import SECTION_TITLES, write_html_report
from arlkit.rollout.records import read_trajectories

BASE, RL = "noisy-oracle:0.6", "noisy-oracle:0.2"


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
    trained = root / "rl"
    trained.mkdir()
    (trained / "metrics.jsonl").write_text("".join(json.dumps({
        "step": s, "reward/success": 0.1 * (s % 3), "optim/grad_norm": 1.0, "actor/kl_loss": 0.01,
        "actor/pg_clipfrac_low": 0.01, "actor/pg_clipfrac_high": 0.02, "stab/seq/zero_adv": 1.0}) + "\n" for s in range(1, 7)))  # fmt: skip
    stability = root / "stability"
    analyze_stability([trained], out=stability)
    return [run, an, flows, train, stability]


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


def test_report_renders_in_headless_chromium(report, tmp_path: Path, rendered_page) -> None:  # type: ignore[no-untyped-def]
    dom, attrs = rendered_page(report.path, tmp_path)
    assert int(attrs["data-images"]) >= 9
    for key in report.sections:
        assert f'<section id="{key}">' in dom
    assert dom.count("<svg") >= 2


# -- announced-budget runs of several policies: merged, side by side, compared ----------------------

POLICY_FOLDERS = {"oracle": "oracle", "noisy-hi": "noisy-oracle:0.6", "noisy-lo": "noisy-oracle:0.2"}
"""Folder -> policy, one ``run_eval`` per (policy, budget) as the demo lays its evaluations out."""
NAMES = {"oracle": "Oracle", "noisy-hi": "Noisy 0.6", "noisy-oracle:0.2": "Noisy 0.2"}
"""Display names by folder and by spec; the policies are drawn in this order."""
FINDINGS = ["- **Oracle** against the noisy oracles: see the paired differences", "- numbers in `passkt.csv`"]


@pytest.fixture(scope="module")
def merged_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("merged")
    for folder, policy in POLICY_FOLDERS.items():
        for budget in ("25", "50", "75", "100"):
            run_eval(EvalConfig(env=EnvSpec("frozenlake", {"t_max": 20}), policies=(policy,), tasks=4, samples=2,
                                budgets=(f"{budget}%",), bootstrap=100), root / "eval" / folder / budget)  # fmt: skip
    # other tasks (3, not 4): cannot be merged with the others and keeps a section of its own
    run_eval(EvalConfig(env=EnvSpec("frozenlake", {"t_max": 20}), policies=("random",), tasks=3, samples=2,
                        budgets=("50%",), bootstrap=100), root / "lone")  # fmt: skip
    return root


@pytest.fixture(scope="module")
def merged_report(merged_root: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return write_html_report([merged_root], tmp_path_factory.mktemp("merged_html") / "report.html", findings=FINDINGS,
                             names=NAMES)  # fmt: skip


def _section(html: str, key: str) -> str:
    found = re.search(rf'<section id="{key}">(.*?)</section>', html, re.DOTALL)
    assert found is not None, key
    return found.group(1)


def _images(html: str) -> list[dict[str, str]]:
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', tag)) for tag in re.findall(r"<img([^>]*)>", html)]


def _groups(html: str) -> list[dict[str, str]]:
    return [dict(re.findall(r"(data-[\w-]+)='([^']*)'", tag)) for tag in re.findall(r"<div class='evalgroup'([^>]*)>", html)]


def test_findings_lead_the_report(merged_report) -> None:  # type: ignore[no-untyped-def]
    html = merged_report.path.read_text(encoding="utf-8")
    assert merged_report.sections[:3] == ("findings", "passk", "differences")
    assert html.index('<section id="findings">') < html.index("<nav>") < html.index('<section id="passk">')
    findings = _section(html, "findings")
    assert "<li><strong>Oracle</strong> against the noisy oracles: see the paired differences</li>" in findings and "<code>passkt.csv</code>" in findings


def test_runs_of_one_policy_merge_into_one_surface(merged_report) -> None:  # type: ignore[no-untyped-def]
    html = merged_report.path.read_text(encoding="utf-8")
    merged, lone = _groups(_section(html, "passk"))  # one group of 12 runs, one that stands alone
    assert merged == {"data-group": "1", "data-policies": "3", "data-budgets": "4", "data-runs": "12"}
    assert lone == {"data-group": "2", "data-policies": "1", "data-budgets": "1", "data-runs": "1"}
    assert "Oracle, Noisy 0.6, Noisy 0.2; announced budgets T = 5, 10, 15, 20; 4 tasks × 2 samples" in html
    # one heat map figure with a panel per policy, not one figure per run
    heatmaps = [i for i in _images(html) if i.get("data-figure") == "heatmap"]
    assert [(i["data-panels"], i["data-budgets"]) for i in heatmaps] == [("3", "4")]
    # the table has a row per policy (display names, in the names' order) and the expected optimum
    tables = _section(html, "tables")
    assert tables.index("<td>Oracle</td>") < tables.index("<td>Noisy 0.6</td>") < tables.index("<td>Noisy 0.2</td>")
    assert tables.count("<td>expected optimum</td>") == 4  # k = 1 and 2, in both groups


def test_policies_side_by_side_with_paired_differences(merged_root: Path, merged_report) -> None:  # type: ignore[no-untyped-def]
    html = merged_report.path.read_text(encoding="utf-8")
    side = [i for i in _images(_section(html, "passk")) if i.get("data-policies") == "3"]
    assert len(side) == 1 and side[0]["data-figure"] == "passkt" and side[0]["data-pass-t-lines"] == "3"
    assert side[0]["alt"] == "Pass@T at K = 1, 2 and Pass@K at T = 5, 10, 15, 20: Oracle, Noisy 0.6, Noisy 0.2"
    assert "expected optimum" in _section(html, "passk")
    diffs = _section(html, "differences")
    table = re.search(r"<table class='differences'>(.*?)</table>", diffs, re.DOTALL)
    assert table is not None
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table.group(1))][1:]
    pairs = ["Noisy 0.6 − Oracle", "Noisy 0.2 − Oracle", "Noisy 0.2 − Noisy 0.6"]
    assert [(r[0], r[1]) for r in rows] == [(p, f"Pass@{k}") for k in (1, 2) for p in pairs]
    # the cell T=20, Pass@1 of Noisy 0.2 − Oracle is the paired bootstrap of the per-task values
    oracle = read_trajectories(merged_root / "eval" / "oracle" / "100" / "trajectories.jsonl")
    noisy = read_trajectories(merged_root / "eval" / "noisy-lo" / "100" / "trajectories.jsonl")
    tasks = list(dict.fromkeys(t.task_id for t in read_trajectories(merged_root / "eval" / "oracle" / "25" / "trajectories.jsonl")))
    est = paired_bootstrap_difference(per_task_pass(noisy, 20, 1, "announced", tasks),
                                      per_task_pass(oracle, 20, 1, "announced", tasks), resamples=2000, seed=0)  # fmt: skip
    cell = re.sub(r"</?strong>", "", rows[1][5])
    assert cell == f"{100 * est.value:+.1f} [{100 * est.low:+.1f}, {100 * est.high:+.1f}]"
    assert any(i.get("data-figure") == "differences" for i in _images(diffs))


def test_no_pass_at_t_plot_with_a_single_point(merged_report) -> None:  # type: ignore[no-untyped-def]
    images = _images(merged_report.path.read_text(encoding="utf-8"))
    with_t = [i for i in images if "data-pass-t-points" in i]
    assert len(with_t) == 3  # the merged group's Pass@(K,T) and differences figures, the lone run's Pass@K
    for image in with_t:
        lines, points = int(image.get("data-pass-t-lines", "1")), int(image["data-pass-t-points"])
        assert (lines == 0 and points == 0) or points >= 2, image["alt"]
    lone = [i for i in with_t if i.get("data-budgets") == "1"]
    assert len(lone) == 1 and lone[0]["data-pass-t-lines"] == "0" and lone[0]["alt"].startswith("Pass@K at T = 10")


def test_runs_that_cannot_merge_stand_alone(merged_root: Path, tmp_path: Path) -> None:
    # a copy of a run gives its policy a second grid at the same budget: it is not merged
    shutil.copytree(merged_root / "eval" / "oracle" / "50", tmp_path / "copy")
    runs = [EvalRun.load(p) for p in sorted((merged_root / "eval" / "oracle").iterdir())] + [EvalRun.load(tmp_path / "copy")]
    groups = group_eval_runs(runs)
    assert [len(g.runs) for g in groups] == [4, 1] and groups[0].budgets == [5, 10, 15, 20]
    assert [s.label for s in groups[0].surfaces] == ["oracle"]


def test_merged_report_renders_in_headless_chromium(merged_report, tmp_path: Path, chromium) -> None:  # type: ignore[no-untyped-def]
    done = chromium(merged_report.path, tmp_path, "--dump-dom")
    dom = done.stdout
    assert [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line] == []
    body = re.search(r"<body([^>]*)>", dom)
    assert body is not None, dom[:500]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))
    assert attrs.get("data-rendered") == "ok" and attrs.get("data-missing-sections") == ""
    images = _images(merged_report.path.read_text(encoding="utf-8"))
    assert attrs.get("data-broken-images") == "0" and int(attrs["data-images"]) == len(images) >= 5
    shot = tmp_path / "report.png"
    chromium(merged_report.path, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", "--hide-scrollbars")
    from PIL import Image

    with Image.open(shot) as image:
        pixels = image.convert("RGB")
        assert pixels.size == (1280, 2400)
        # the page is not blank: the figures' lines and fills give many colours, not white and text grey
        colours = pixels.getcolors(maxcolors=1 << 20) or []
        assert len(colours) > 200, len(colours)
