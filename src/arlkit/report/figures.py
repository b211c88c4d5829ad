"""Matplotlib figures of the analyses, drawn from plain numbers (the analyses' CSV contents), so
``arlkit analyze`` and ``arlkit report`` draw the same pictures.

Every function returns a ``matplotlib.figure.Figure``; :func:`png_base64` turns one into the
base64 text the HTML report embeds.
"""

from __future__ import annotations

import base64
import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "OPTIMUM_LABEL",
    "fig_depth",
    "fig_differences",
    "fig_dynamics",
    "fig_errors",
    "fig_heatmap",
    "fig_judge",
    "fig_likelihood",
    "fig_loops",
    "fig_passkt",
    "fig_quality_scatter",
    "fig_sankey",
    "pass_t_lines",
    "png_base64",
]

_BASE, _RL = "#4e79a7", "#e15759"
Interval = tuple[float, float, float]
"""``(value, low, high)``."""


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_base64(fig: Any, *, dpi: int = 100) -> str:
    """The figure as base64-encoded PNG (the figure is closed)."""
    plt = _plt()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _finite(values: Sequence[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return arr[~np.isnan(arr)]


def fig_quality_scatter(
    base: Sequence[float], rl: Sequence[float], sources: Sequence[str], *, title: str, ax: Any = None
) -> Any:
    """x = base quality, y = RL quality per state, with the diagonal; colour = whose trajectory
    reached the state."""
    plt = _plt()
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.2, 5.0))
    b, r = np.asarray(base, dtype=float), np.asarray(rl, dtype=float)
    src = np.asarray(sources)
    lo = float(np.nanmin(np.concatenate([b, r, [0.0]])))
    hi = float(np.nanmax(np.concatenate([b, r, [1e-9]])))
    pad = 0.03 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="grey", linestyle="--", linewidth=1)
    for name, color in (("base", _BASE), ("rl", _RL)):
        mask = src == name
        if mask.any():
            ax.scatter(b[mask], r[mask], s=14, alpha=0.6, color=color, label=f"states from {name} trajectories")
    ax.set(xlabel="base quality", ylabel="RL quality", title=title, xlim=(lo - pad, hi + pad), ylim=(lo - pad, hi + pad))
    ax.legend(fontsize=7, loc="upper left")
    if fig is not None:
        fig.tight_layout()
    return fig if fig is not None else ax.figure


def _bars(ax: Any, labels: Sequence[str], items: Sequence[Interval | None], colors: Sequence[str], ylabel: str, title: str) -> None:
    xs = np.arange(len(labels))
    for x, item, color in zip(xs, items, colors, strict=True):
        if item is None or math.isnan(item[0]):
            continue
        value, low, high = item
        ax.bar(x, value, color=color, alpha=0.8)
        ax.errorbar(x, value, yerr=[[value - low], [high - value]], color="black", capsize=4)
        ax.text(x, high + 0.02, f"{value:.2f}", ha="center", fontsize=8)
    ax.set_xticks(xs, list(labels))
    ax.set(ylabel=ylabel, title=title, ylim=(0, 1.1))


def fig_errors(
    base: Sequence[float],
    rl: Sequence[float],
    sources: Sequence[str],
    continuation: Mapping[str, Interval] | None,
    correction: Mapping[str, Interval] | None,
    *,
    title: str,
) -> Any:
    """Action quality at error states (scatter), continuation success and error correction (bars
    with 95% intervals)."""
    plt = _plt()
    panels = 1 + (continuation is not None) + (correction is not None)
    fig, axes = plt.subplots(1, panels, figsize=(5.0 * panels, 4.4), squeeze=False)
    k = 0
    if len(base):
        fig_quality_scatter(base, rl, sources, title="action quality at error states", ax=axes[0][k])
    else:
        axes[0][k].text(0.5, 0.5, "no scored error states", ha="center", va="center")
        axes[0][k].set_axis_off()
    k += 1
    if continuation is not None:
        _bars(axes[0][k], ["base", "RL"], [continuation.get("base"), continuation.get("rl")], [_BASE, _RL],
              "success rate", "continuation success from error states")  # fmt: skip
        k += 1
    if correction is not None:
        _bars(axes[0][k], ["base", "RL"], [correction.get("base"), correction.get("rl")], [_BASE, _RL],
              "corrected share", "next action after a failed call")  # fmt: skip
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def fig_depth(centers: Sequence[float], values: Sequence[float], lows: Sequence[float], highs: Sequence[float],
              counts: Sequence[int], *, title: str) -> Any:  # fmt: skip
    """RL − base quality per depth bin with 95% intervals."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    c = np.asarray(centers, dtype=float)
    v, lo, hi = (np.asarray(x, dtype=float) for x in (values, lows, highs))
    ok = ~np.isnan(v)
    ax.axhline(0.0, color="grey", linestyle="--", linewidth=1)
    ax.plot(c[ok], v[ok], marker="o", color=_RL)
    ax.fill_between(c[ok], lo[ok], hi[ok], color=_RL, alpha=0.2, label="95% bootstrap CI")
    for x, y, n in zip(c[ok], v[ok], np.asarray(counts)[ok], strict=True):
        ax.annotate(f"n={n}", (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7)
    ax.set(xlabel="normalised depth t / T", ylabel="RL − base quality", title=title, xlim=(0, 1))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def fig_likelihood(
    nll: Mapping[str, Sequence[float]],
    curves: Mapping[str, Sequence[Sequence[float]]],
    diffs: Sequence[float],
    paired: Interval | None,
    *,
    title: str,
) -> Any:
    """ActionNLL box plots, mean cumulative LLR against the turn, and length-matched differences."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    data = [_finite(nll.get("base", [])), _finite(nll.get("rl", []))]
    if any(len(d) for d in data):
        axes[0].boxplot([d if len(d) else [np.nan] for d in data], showfliers=False)
        axes[0].set_xticks([1, 2], ["base actions", "RL actions"])
    axes[0].set(ylabel="ActionNLL under base (nats/token)", title="per-token action NLL")
    for side, color in (("base", _BASE), ("rl", _RL)):
        trajs = [np.asarray(c, dtype=float) for c in curves.get(side, []) if len(c)]
        if not trajs:
            continue
        longest = max(len(c) for c in trajs)
        turns, means, lows, highs = [], [], [], []
        for k in range(longest):
            at = np.array([c[k] for c in trajs if len(c) > k])
            turns.append(k + 1)
            means.append(at.mean())
            half = 1.96 * at.std(ddof=1) / math.sqrt(len(at)) if len(at) > 1 else 0.0
            lows.append(at.mean() - half)
            highs.append(at.mean() + half)
        axes[1].plot(turns, means, color=color, marker=".", label=f"successful {side} trajectories (n={len(trajs)})")
        axes[1].fill_between(turns, lows, highs, color=color, alpha=0.15)
    axes[1].axhline(0.0, color="grey", linestyle="--", linewidth=1)
    axes[1].set(xlabel="turn", ylabel="cumulative log π_RL − log π_base (nats)", title="cumulative LLR")
    axes[1].legend(fontsize=7)
    d = _finite(diffs)
    if len(d):
        axes[2].hist(d, bins=min(30, max(5, len(d) // 3)), color="#999999")
    if paired is not None:
        value, low, high = paired
        axes[2].axvline(value, color=_RL, label=f"mean {value:.1f} [{low:.1f}, {high:.1f}]")
        axes[2].axvspan(low, high, color=_RL, alpha=0.15)
        axes[2].legend(fontsize=7)
    axes[2].axvline(0.0, color="grey", linestyle="--", linewidth=1)
    axes[2].set(xlabel="LLR(RL traj.) − LLR(base traj.) (nats)", ylabel="pairs", title=f"length-matched pairs (n={len(d)})")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def fig_judge(oracle: Sequence[float], judge: Sequence[float], *, title: str) -> Any:
    """Judge score against the oracle value for every scored action (jittered)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    o, j = np.asarray(oracle, dtype=float), np.asarray(judge, dtype=float)
    ok = ~np.isnan(j)
    rng = np.random.default_rng(0)
    ax.scatter(o[ok], j[ok] + rng.uniform(-0.015, 0.015, ok.sum()), s=12, alpha=0.5, color=_BASE)
    ax.set(xlabel="oracle Q*_h(s, a)", ylabel="judge score / 10", title=title, ylim=(-0.05, 1.05))
    fig.tight_layout()
    return fig


def fig_loops(groups: Sequence[str], rows: Mapping[str, Sequence[float]], *, title: str) -> Any:
    """Grouped bars: share of trajectories with each loop kind, and the share of turns in loops."""
    plt = _plt()
    metrics = ["repeat", "oscillation", "revisit", "any_loop", "loop_turn_share"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(groups) + 3), 4.0))
    width = 0.8 / max(len(metrics), 1)
    xs = np.arange(len(groups))
    for k, metric in enumerate(metrics):
        values = np.nan_to_num(np.asarray(rows.get(metric, [np.nan] * len(groups)), dtype=float))
        ax.bar(xs + (k - len(metrics) / 2 + 0.5) * width, values, width, label=metric.replace("_", " "))
    ax.set_xticks(xs, list(groups), rotation=15, fontsize=7)
    ax.set(ylabel="share", ylim=(0, 1.22), title=title)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.legend(fontsize=7, ncol=len(metrics), loc="upper center")
    fig.tight_layout()
    return fig


def fig_sankey(layout: Any, *, title: str) -> Any:
    """The Sankey layout of :func:`arlkit.analysis.sankey.sankey_layout` drawn with matplotlib."""
    plt = _plt()
    from matplotlib.patches import PathPatch, Rectangle
    from matplotlib.path import Path as MPath

    from arlkit.analysis.sankey import OUTCOME_COLORS

    colors = layout.colors
    fig, ax = plt.subplots(figsize=(layout.width / 100, layout.height / 100 + 0.5))
    for link in layout.links:
        xm = (link.x0 + link.x1) / 2
        verts = [
            (link.x0, link.y0), (xm, link.y0), (xm, link.y1), (link.x1, link.y1),
            (link.x1, link.y1 + link.width), (xm, link.y1 + link.width), (xm, link.y0 + link.width),
            (link.x0, link.y0 + link.width), (link.x0, link.y0),
        ]  # fmt: skip
        codes = [MPath.MOVETO, MPath.CURVE4, MPath.CURVE4, MPath.CURVE4, MPath.LINETO,
                 MPath.CURVE4, MPath.CURVE4, MPath.CURVE4, MPath.CLOSEPOLY]  # fmt: skip
        ax.add_patch(PathPatch(MPath(verts, codes), facecolor=OUTCOME_COLORS.get(link.outcome, "#888"), alpha=0.4, lw=0))
    for node in layout.nodes:
        ax.add_patch(Rectangle((node.x, node.y), layout.node_width, max(node.height, 0.5), color=colors[node.label]))
        if node.height >= 9:
            ax.text(node.x + layout.node_width + 2, node.y + node.height / 2, node.label, va="center", fontsize=7)
    ax.set_xlim(0, layout.width)
    ax.set_ylim(layout.height, 0)
    ax.set_axis_off()
    counts = ", ".join(f"{o}: {n}" for o, n in layout.trajectories.items())
    ax.set_title(f"{title} ({counts}; green = success, red = failure)", fontsize=9)
    fig.tight_layout()
    return fig


def pass_t_lines(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """The budgets of each line :func:`fig_passkt` draws in its Pass@T panels: policies with at least
    two budgets (a line of one point says nothing about T); empty when the rows hold fewer than two
    budgets, and then the figure has no Pass@T panel."""
    budgets: dict[str, set[int]] = {}
    for r in rows:
        budgets.setdefault(str(r["policy"]), set()).add(int(r["T"]))
    return {p: sorted(ts) for p, ts in budgets.items() if len(ts) >= 2}


def _value(r: Mapping[str, Any], key: str) -> float | None:
    v = r.get(key)
    return None if v in (None, "") else float(v)


OPTIMUM_LABEL = "expected optimum"
"""The legend of the environment's bound, the mean over tasks of ``1 - (1 - p*)^k``: the expected
Pass@k of the optimal policy, which a sampled Pass@k can exceed."""


def fig_passkt(rows: Sequence[Mapping[str, Any]], *, title: str, colors: Mapping[str, str] | None = None) -> Any:
    """The one Pass@(K,T) figure (an eval's ``passkt.png``, the demo's, the HTML report's).

    Top: Pass@T at K = the smallest and the largest k, one line per policy with at least two budgets
    (:func:`pass_t_lines`) with its 95% CI band, and the expected optimum dashed where known; left out
    when the rows hold one budget. Bottom: Pass@K at each budget T, one line per policy and the
    expected optimum; left out when there is one k and a Pass@T panel. ``rows``: dicts with
    ``policy``, ``T``, ``k``, ``pass``, ``ci_low``, ``ci_high`` and optionally ``expected_optimum``
    (strings as read from ``passkt.csv`` are accepted); ``colors`` maps policies to colours (tab10
    otherwise).
    """
    plt = _plt()
    policies = list(dict.fromkeys(str(r["policy"]) for r in rows))
    ks = sorted({int(r["k"]) for r in rows})
    budgets = sorted({int(r["T"]) for r in rows})
    cell = {(str(r["policy"]), int(r["T"]), int(r["k"])): r for r in rows}
    bound_at = {(int(r["T"]), int(r["k"])): _value(r, "expected_optimum") for r in rows if _value(r, "expected_optimum") is not None}
    cmap = plt.get_cmap("tab10")
    color = {p: (colors or {}).get(p, cmap(i % 10)) for i, p in enumerate(policies)}
    lines = pass_t_lines(rows)
    show_k = sorted({ks[0], ks[-1]}) if ks and lines else []
    show_budgets = budgets if len(ks) >= 2 or not show_k else []
    columns = max(len(show_budgets), 2 if show_k else 1)
    fig = plt.figure(figsize=(4 * columns, 3.7 * (bool(show_k) + bool(show_budgets))))
    grid = fig.add_gridspec(bool(show_k) + bool(show_budgets), 2 * columns)
    top = [fig.add_subplot(grid[0, i * columns : (i + 1) * columns]) for i in range(len(show_k))]
    bottom = [fig.add_subplot(grid[-1, 2 * i : 2 * i + 2]) for i in range(len(show_budgets))]

    for ax, k in zip(top, show_k, strict=True):
        for policy, line_budgets in lines.items():
            line = [cell[(policy, T, k)] for T in line_budgets if (policy, T, k) in cell]
            xs = [int(r["T"]) for r in line]
            ax.plot(xs, [_value(r, "pass") for r in line], marker="o", color=color[policy], label=policy)
            ax.fill_between(xs, [_value(r, "ci_low") for r in line], [_value(r, "ci_high") for r in line],
                            color=color[policy], alpha=0.15)  # fmt: skip
        bound = [(T, bound_at[(T, k)]) for T in budgets if (T, k) in bound_at]
        if len(bound) >= 2:
            ax.plot([T for T, _ in bound], [b for _, b in bound], linestyle="--", color="black", alpha=0.5,
                    label=OPTIMUM_LABEL)  # fmt: skip
        ax.set(title=f"Pass@T (K={k})", xlabel="budget T (turns)", ylabel=f"Pass@{k}", ylim=(-0.02, 1.02))
        ax.legend(fontsize=7)
    for ax, T in zip(bottom, show_budgets, strict=True):
        for policy in policies:
            line = [cell[(policy, T, k)] for k in ks if (policy, T, k) in cell]
            ax.plot([int(r["k"]) for r in line], [_value(r, "pass") for r in line], marker="o", color=color[policy],
                    label=policy)  # fmt: skip
        bound = [(k, bound_at[(T, k)]) for k in ks if (T, k) in bound_at]
        if bound:
            ax.plot([k for k, _ in bound], [b for _, b in bound], linestyle="--", marker="_", color="black", alpha=0.5,
                    label=OPTIMUM_LABEL)  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set(title=f"Pass@K at T={T}", xlabel="samples K", ylim=(-0.02, 1.02))
        ax.legend(fontsize=7)
    fig.suptitle(textwrap.fill(title, width=int(9 * fig.get_figwidth())))  # a narrow figure wraps its title
    fig.tight_layout()
    return fig


def fig_differences(
    differences: Mapping[int, Mapping[str, Sequence[tuple[int, float, float, float]]]], *, title: str
) -> Any:
    """Paired differences between policies against the budget: a panel per k of ``differences``
    (``{k: {"B − A": [(T, value, low, high), ...]}}``), a line per pair with its 95% interval as
    error bars, and zero dashed. Pairs with fewer than two budgets are left out."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(differences), figsize=(6.0 * len(differences), 3.8), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, (k, pairs) in zip(axes[0], differences.items(), strict=True):
        ax.axhline(0.0, color="grey", linestyle="--", linewidth=1)
        for i, (pair, points) in enumerate(pairs.items()):
            if len(points) < 2:
                continue
            ts = np.array([p[0] for p in points], dtype=float) + 0.15 * (i - (len(pairs) - 1) / 2)
            v, lo, hi = (np.array([p[j] for p in points], dtype=float) for j in (1, 2, 3))
            ax.errorbar(ts, v, yerr=[v - lo, hi - v], marker="o", capsize=3, color=cmap(i % 10), label=pair)
        ax.set(title=f"paired difference in Pass@{k}", xlabel="budget T (turns)", ylabel="difference (percentage points)")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def fig_heatmap(rows: Sequence[Mapping[str, Any]], *, title: str) -> Any:
    """The (K, T) grid of Pass@(K,T) as a heat map, one panel per policy."""
    plt = _plt()
    policies = list(dict.fromkeys(str(r["policy"]) for r in rows))
    ks = sorted({int(r["k"]) for r in rows})
    budgets = sorted({int(r["T"]) for r in rows})
    fig, axes = plt.subplots(1, len(policies), figsize=(3.6 * len(policies) + 1, 3.4), squeeze=False)
    cell = {(str(r["policy"]), int(r["T"]), int(r["k"])): float(r["pass"]) for r in rows}
    image = None
    for ax, policy in zip(axes[0], policies, strict=True):
        grid = np.array([[cell.get((policy, T, k), np.nan) for T in budgets] for k in ks])
        image = ax.imshow(grid, origin="lower", vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for i in range(len(ks)):
            for j in range(len(budgets)):
                if not math.isnan(grid[i, j]):
                    ax.text(j, i, f"{100 * grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                            color="white" if grid[i, j] < 0.6 else "black")  # fmt: skip
        ax.set_xticks(range(len(budgets)), [str(T) for T in budgets])
        ax.set_yticks(range(len(ks)), [str(k) for k in ks])
        ax.set(xlabel="T", ylabel="K", title=policy)
    fig.suptitle(title)
    fig.subplots_adjust(top=0.78, bottom=0.16, wspace=0.35)
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="Pass@(K,T)")
    return fig


def fig_dynamics(
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    panels: Sequence[tuple[str, str]],
    *,
    title: str = "",
    colors: Mapping[str, str] | None = None,
) -> Any:
    """The one training-dynamics figure: a panel per ``(metric, panel title)`` of ``panels``, a line per
    run of ``runs`` (label -> ``metrics.jsonl`` records with a ``step``); records without the metric
    (or with NaN) are skipped."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.6), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, (key, panel_title) in zip(axes[0], panels, strict=True):
        for i, (label, records) in enumerate(runs.items()):
            points = [(float(r["step"]), float(r[key])) for r in records
                      if r.get(key) not in (None, "") and not math.isnan(float(r[key]))]  # fmt: skip
            if points:
                ax.plot([x for x, _ in points], [y for _, y in points], marker=".",
                        color=(colors or {}).get(label, cmap(i % 10)), label=label)  # fmt: skip
        ax.set(title=panel_title, xlabel="training step")
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
