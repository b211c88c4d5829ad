"""The eight-group sequence breakdown of AA Fig. 3 against a hand-computed batch."""

from __future__ import annotations

import math

import pytest
import torch

from arlkit.algos import GROUPS, sequence_groups

INF = math.inf


def _batch() -> dict[str, torch.Tensor]:
    # row 0: A = -1, mean log-ratio -0.1 (low), entropy 2.0; row 1: A = 2, +0.05 (high), entropy 0.5;
    # row 2: A = 0 (zero advantage), entropy 4.0; row 3: no valid token. inf sits under the mask.
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [0, 0, 0]], dtype=torch.bool)
    old = torch.zeros(4, 3)
    new = torch.tensor([[-0.2, 0.0, INF], [0.1, 0.1, -0.05], [0.0, INF, 0.0], [INF, 0.0, 0.0]])
    adv = torch.tensor([[-1.0, -1.0, 0.0], [2.0, 2.0, 2.0], [0.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
    ent = torch.tensor([[1.0, 3.0, INF], [0.5, 0.5, 0.5], [4.0, INF, 0.0], [9.0, 9.0, 9.0]])
    kl = torch.tensor([[0.3, 0.1, INF], [0.2, 0.2, 0.2], [1.0, INF, 0.0], [7.0, 7.0, 7.0]])
    return {"old_log_prob": old, "log_prob": new, "advantages": adv, "response_mask": mask, "entropy": ent, "kl": kl}


def test_groups_and_kl_shares_by_hand() -> None:
    b = _batch()
    out = {k: float(v) for k, v in sequence_groups(b["old_log_prob"], b["log_prob"], b["advantages"], b["response_mask"],
                                                   entropy=b["entropy"], kl=b["kl"]).items()}  # fmt: skip
    # Median entropy over the three rows with tokens is 2.0; "low" is strictly below it.
    assert out["stab/entropy_threshold"] == pytest.approx(2.0)
    expected_rows = {g: 0.0 for g in GROUPS} | {"neg_adv.low_ratio.high_ent": 1 / 3, "pos_adv.high_ratio.low_ent": 1 / 3}
    for g in GROUPS:
        assert out[f"stab/seq/{g}"] == pytest.approx(expected_rows[g]), g
    assert out["stab/seq/zero_adv"] == pytest.approx(1 / 3)
    # Sequence KLs 0.4, 0.6, 1.0 (total 2.0).
    expected_kl = {g: 0.0 for g in GROUPS} | {"neg_adv.low_ratio.high_ent": 0.2, "pos_adv.high_ratio.low_ent": 0.3}
    for g in GROUPS:
        assert out[f"stab/kl/{g}"] == pytest.approx(expected_kl[g]), g
    assert out["stab/kl/zero_adv"] == pytest.approx(0.5)
    assert sum(out[f"stab/seq/{g}"] for g in GROUPS) + out["stab/seq/zero_adv"] == pytest.approx(1.0)


def test_a_given_threshold_and_missing_inputs() -> None:
    b = _batch()
    out = sequence_groups(b["old_log_prob"], b["log_prob"], b["advantages"], b["response_mask"], entropy=b["entropy"],
                          entropy_threshold=0.4)  # fmt: skip
    assert float(out["stab/seq/pos_adv.high_ratio.high_ent"]) == pytest.approx(1 / 3)
    assert not any(k.startswith("stab/kl/") for k in out)  # no KL tensor, no KL shares
    bare = sequence_groups(b["old_log_prob"], b["log_prob"], b["advantages"], b["response_mask"])
    assert float(bare["stab/seq/neg_adv.low_ratio.high_ent"]) == pytest.approx(1 / 3)
    assert all(float(bare[f"stab/seq/{g}"]) == 0.0 for g in GROUPS if g.endswith("low_ent"))


def test_on_policy_rows_are_high_ratio_and_an_empty_batch_is_zero() -> None:
    b = _batch()
    same = sequence_groups(b["log_prob"], b["log_prob"], b["advantages"], b["response_mask"], kl=torch.zeros(4, 3))
    assert float(same["stab/seq/neg_adv.high_ratio.high_ent"]) == pytest.approx(1 / 3)
    assert all(float(v) == 0.0 for k, v in same.items() if k.startswith("stab/kl/"))
    empty = sequence_groups(*(torch.zeros(2, 2),) * 3, torch.zeros(2, 2, dtype=torch.bool), entropy=torch.zeros(2, 2))
    assert all(float(v) == 0.0 for v in empty.values())
