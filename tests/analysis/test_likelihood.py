"""Likelihood analysis (docs/metrics.md#likelihood): ActionNLL, cumulative LLR and length-matched pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from arlkit.analysis.likelihood import (
    LikelihoodConfig,
    TrajectoryLLR,
    action_token_span,
    length_matched_pairs,
    likelihood_analysis,
)
from arlkit.analysis.runs import paired_runs
from arlkit.analysis.states import point_messages, replay_states
from arlkit.policies import ScoringPolicy


@dataclass
class CharScorer:
    """A causal fake language model whose tokens are characters: the log-prob of character i
    depends on the character, its position and the last message only (so a prefix of a reply gets
    the same log-probs as the same characters inside the whole reply)."""

    scale: float = 1.0

    def score(self, messages: Sequence[Sequence[dict]], continuations: Sequence[str]) -> list[list[float]]:
        out = []
        for msgs, text in zip(messages, continuations, strict=True):
            salt = len(msgs[-1]["content"]) % 7
            out.append([-self.scale * (0.5 + ((ord(c) * 31 + i + salt) % 11) / 10) for i, c in enumerate(text)])
        return out


def _pair(run: Path):  # type: ignore[no-untyped-def]
    return paired_runs([run], base_spec="noisy-oracle:0.6", rl_spec="noisy-oracle:0.2")


def test_fake_scorer_is_a_scoring_policy() -> None:
    assert isinstance(CharScorer(), ScoringPolicy)


def test_identical_models_give_zero_llr_and_a_paired_interval_around_zero(fl_run: Path) -> None:
    pair = _pair(fl_run)
    result = likelihood_analysis(CharScorer(), CharScorer(), pair.make_env, pair.tasks, pair.base, pair.rl,
                                 LikelihoodConfig(max_trajectories=12, successful_only=False, bootstrap=200))
    assert all(c == 0.0 for t in result.trajectories for c in t.cumulative)
    assert result.paired is not None and len(result.pairs) > 0
    assert result.paired.low <= 0.0 <= result.paired.high
    for side in ("base", "rl"):
        est = result.final_llr[side]
        assert est is not None and est.value == 0.0


def test_action_nll_equals_the_scoring_api_on_the_action_span(fl_run: Path) -> None:
    pair = _pair(fl_run)
    scorer = CharScorer()
    result = likelihood_analysis(scorer, CharScorer(scale=0.5), pair.make_env, pair.tasks, pair.base[:3], pair.rl[:3],
                                 LikelihoodConfig(max_trajectories=None, successful_only=False, bootstrap=100))
    env = pair.make_env()
    turns = iter(result.turns)
    for traj in pair.base[:3] + pair.rl[:3]:
        for point, turn in zip(replay_states(env, pair.tasks[traj.task_id], traj), traj.turns, strict=True):
            env.restore(point.snapshot)
            logps = scorer.score([point_messages(point, env)], [turn.reply])[0]
            start = turn.reply.rfind(turn.action)
            expected = -np.mean(logps[start : start + len(turn.action)])
            scored = next(turns)
            assert scored.action_exact and scored.action_tokens == len(turn.action)
            assert scored.action_nll == pytest.approx(expected, abs=1e-12)
            assert scored.logp_base == pytest.approx(sum(logps))
            assert scored.logp_rl == pytest.approx(0.5 * sum(logps))  # the 'RL' model: half the surprisal
    # log pi_RL - log pi_base = +0.5 * surprisal > 0 on every turn: the cumulative LLR only grows
    for t in result.trajectories:
        assert all(b > a for a, b in zip((0.0, *t.cumulative), t.cumulative, strict=False))


def test_action_span_from_common_prefixes() -> None:
    full = [-1.0, -2.0, -3.0, -4.0, -5.0]
    assert action_token_span(full, [-1.0, -2.0], [-1.0, -2.0, -3.0, -4.0]) == (2, 4, True)
    # a prefix whose last token differs (tokenisation across the boundary): span widens, not exact
    assert action_token_span(full, [-1.0, -9.0], [-1.0, -2.0, -3.0, -4.0]) == (1, 4, False)


def test_length_matching_pairs_closest_within_tolerance() -> None:
    def t(side: str, task: str, tokens: int, llr: float) -> TrajectoryLLR:
        return TrajectoryLLR(side, task, 0, True, tokens, (llr,))

    trajs = [
        t("base", "a", 100, 1.0),  # 0
        t("base", "a", 80, 2.0),  # 1
        t("rl", "a", 95, 5.0),  # 2: pairs with 0 (|100-95| = 5 <= 10)
        t("rl", "a", 96, 6.0),  # 3: closer to 0 (4) -> takes 0; 2 is then left for 1? |95-80| = 15 > 9.5 -> no
        t("rl", "b", 100, 0.0),  # 4: no base of task b
    ]
    assert length_matched_pairs(trajs, 0.10) == [(0, 3)]
    assert length_matched_pairs(trajs, 0.20) == [(0, 3), (1, 2)]


@pytest.mark.slow
def test_with_the_tiny_hf_model(tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("arlkit.policies.hf", reason="the hf backend (arlkit.policies.hf) is not available")
    from arlkit.envs import make
    from arlkit.policies import make_policy
    from arlkit.rollout.corpus import init_tiny_model
    from arlkit.rollout import make_jobs, run_rollouts

    path = init_tiny_model("nano", tmp_path_factory.mktemp("tiny") / "nano")
    model = make_policy(f"hf:{path}")
    make_env = lambda: make("frozenlake", t_max=3)  # noqa: E731
    tasks = make_env().tasks("test", 1)
    base = run_rollouts(make_env, make_jobs(tasks, 1, 3, seed=0), make_policy("noisy-oracle:0.5"))
    rl = run_rollouts(make_env, make_jobs(tasks, 1, 3, seed=1), make_policy("oracle"))
    by_id = {t.task_id: t for t in tasks}
    # the same model as base and RL: identical numbers, so the LLR is 0
    result = likelihood_analysis(model, model, make_env, by_id, base, rl,  # type: ignore[arg-type]
                                 LikelihoodConfig(successful_only=False, bootstrap=100))
    assert all(abs(c) < 1e-4 for t in result.trajectories for c in t.cumulative)
    assert result.paired is None or (result.paired.low <= 1e-4 and result.paired.high >= -1e-4)
    # ActionNLL = the scoring API's log-probs on the action's tokens, located with the tokenizer
    env = make_env()
    turns = iter(result.turns)
    for traj in base + rl:
        for point, turn in zip(replay_states(env, by_id[traj.task_id], traj), traj.turns, strict=True):
            env.restore(point.snapshot)
            at = turn.reply.rfind(turn.action)
            start = len(model.continuation_ids(turn.reply[:at]))  # type: ignore[attr-defined]
            end = len(model.continuation_ids(turn.reply[: at + len(turn.action)]))  # type: ignore[attr-defined]
            logps = model.score([point_messages(point, env)], [turn.reply])[0]  # type: ignore[attr-defined]
            scored = next(turns)
            assert scored.action_exact and scored.action_tokens == end - start
            assert scored.action_nll == pytest.approx(-np.mean(logps[start:end]), abs=1e-4)
