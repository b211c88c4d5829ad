"""``arlkit study`` of the two tiny models ``arlkit demo --quick`` trains (its cloned Base and its first Full
RL run), locally (``hf:``) and served by two ``arlkit serve`` servers (``openai:``): the served study
equals the local one where sampling is seeded (greedy here), its likelihoods to 1e-4."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from arlkit.cli import main
from arlkit.policies import SamplingConfig
from arlkit.policies.hf import HFPolicy, load_hf_model
from arlkit.policies.serve import OpenAICompatibleServer
from arlkit.recipes.demo_plan import DEMO_ENV

STUDY = [
    "--env", "frozenlake", *(a for k, v in DEMO_ENV.items() for a in ("--env-arg", f"{k}={v}")),
    "--prompt-profile", "compact", "--history", "0", "--tasks", "4", "--samples", "2", "--budgets", "50%,100%",
    "--temperature", "0", "--max-new-tokens", "32", "--quick",
]  # fmt: skip
"""The demo's maps and prompts, a small study, greedy replies (served and local replies then agree)."""


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _served(model: Path, name: str) -> OpenAICompatibleServer:
    loaded, tokenizer = load_hf_model(model)
    return OpenAICompatibleServer(HFPolicy(loaded, tokenizer, SamplingConfig(temperature=0.0, max_new_tokens=32)), name)


@pytest.mark.slow
def test_the_study_of_the_demo_models_local_and_served(quick_demo: Any, tmp_path: Path, rendered_page: Any) -> None:
    assert quick_demo.done.returncode == 0, quick_demo.done.stderr[-3000:]
    training = quick_demo.out / "rl-full-s0"
    base, rl = quick_demo.out / "bc" / "model", training / "final"
    local = tmp_path / "local"
    assert main(["study", "--base", str(base), "--rl", str(rl), *STUDY, "--train-runs", str(training),
                 "--out", str(local)]) == 0
    summary = (local / "summary.md").read_text()
    stages = summary[summary.index("## Stages"):]
    for kind in ("steps", "depth", "errors", "likelihood", "flows"):
        assert f"- {kind}: done" in stages, (kind, stages)
    assert "- judge: skipped: no --judge given" in stages
    assert "Likelihood: ActionNLL under Base (nats/token): Base's actions " in summary
    assert "- Training run rl-full-s0 (" in summary and "R_multi " in summary
    dom, _ = rendered_page(local / "report.html", tmp_path)
    for section in ("findings", "passk", "steps", "errors", "depth", "likelihood", "dynamics"):
        assert f'<section id="{section}">' in dom, section
    with _served(base, "base") as base_server, _served(rl, "rl") as rl_server:
        served = tmp_path / "served"
        assert main(["study", "--base", f"openai:base@{base_server.base_url}", "--rl", f"openai:rl@{rl_server.base_url}",
                     *STUDY, "--out", str(served)]) == 0
    assert "- likelihood: done" in (served / "summary.md").read_text()
    # Pass@(K,T): the same numbers, the served policies in the local ones' places
    assert [(r["T"], r["k"], r["pass"], r["ci_low"], r["ci_high"]) for r in _rows(served / "eval" / "passkt.csv")] == \
           [(r["T"], r["k"], r["pass"], r["ci_low"], r["ci_high"]) for r in _rows(local / "eval" / "passkt.csv")]
    # the same states and step qualities, error states and continuations
    for name, columns in (("steps.csv", ("task_id", "t", "base_quality", "rl_quality")),
                          ("errors.csv", ())):
        a, b = _rows(served / "analysis" / name), _rows(local / "analysis" / name)
        assert len(a) == len(b) > 0, name
        keys = columns or tuple(a[0])
        assert [[r[c] for c in keys] for r in a] == [[r[c] for c in keys] for r in b], name
    # likelihoods scored by the servers equal the local models' to 1e-4, turn by turn
    a, b = _rows(served / "analysis" / "likelihood_turns.csv"), _rows(local / "analysis" / "likelihood_turns.csv")
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert (x["task_id"], x["turn"], x["tokens"]) == (y["task_id"], y["turn"], y["tokens"])
        for column in ("logp_base", "logp_rl"):
            assert float(x[column]) == pytest.approx(float(y[column]), abs=1e-4), (column, x, y)
    assert any(abs(float(x["logp_base"]) - float(x["logp_rl"])) > 1e-2 for x in b)  # the two models differ
