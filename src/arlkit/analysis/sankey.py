"""A dependency-free Sankey layout of action flows, drawn as inline SVG (and as PNG in
:mod:`arlkit.report.figures`).

Columns are steps; a node's height is the number of trajectories taking that action at that step;
a link's width is the number going from one action to the next, coloured by outcome (green:
successful trajectories, red: failed ones). Nodes keep one order in every column (most frequent
action first) so that loops show as horizontal bands.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from arlkit.analysis.flows import CUT_OFF_LABEL, INVALID_LABEL, FlowCounts

__all__ = ["OUTCOME_COLORS", "SankeyLayout", "SankeyLink", "SankeyNode", "label_colors", "sankey_layout", "sankey_svg"]

OUTCOME_COLORS = {"success": "#2a9d4b", "failure": "#d1495b"}
_PALETTE = ("#4e79a7", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#e15759")


@dataclass(frozen=True)
class SankeyNode:
    """A node: ``count`` trajectories took ``label`` at ``step``; drawn at (x, y) with ``height``."""

    step: int
    label: str
    count: int
    x: float
    y: float
    height: float


@dataclass(frozen=True)
class SankeyLink:
    """A band of ``count`` trajectories of ``outcome`` going from ``source`` at ``step`` to
    ``target`` at ``step + 1``; it leaves at (x0, y0) and arrives at (x1, y1) with ``width``."""

    step: int
    source: str
    target: str
    outcome: str
    count: int
    x0: float
    y0: float
    x1: float
    y1: float
    width: float


@dataclass(frozen=True)
class SankeyLayout:
    """Geometry of a Sankey diagram in pixel units (y grows downwards).

    Attributes:
        width: canvas width.
        height: canvas height.
        node_width: width of the node bars.
        nodes: the nodes.
        links: the links.
        labels: the action labels in drawing order.
        outcomes: the outcomes included.
        trajectories: trajectories per outcome.
        colors: fill colour of each label's nodes.
    """

    width: float
    height: float
    node_width: float
    nodes: tuple[SankeyNode, ...]
    links: tuple[SankeyLink, ...]
    labels: tuple[str, ...]
    outcomes: tuple[str, ...]
    trajectories: dict[str, int]
    colors: dict[str, str]


def label_colors(labels: Sequence[str]) -> dict[str, str]:
    """A colour per label, assigned in alphabetical order (greys for ``(invalid)`` and ``(cut off)``),
    so the same labels get the same colours in every diagram."""
    out, k = {}, 0
    for label in sorted(set(labels)):
        if label == INVALID_LABEL:
            out[label] = "#9a9a9a"
        elif label == CUT_OFF_LABEL:
            out[label] = "#c8c8c8"
        else:
            out[label] = _PALETTE[k % len(_PALETTE)]
            k += 1
    return out


def sankey_layout(
    flows: FlowCounts,
    *,
    outcomes: Sequence[str] = ("success", "failure"),
    width: float = 900.0,
    height: float = 360.0,
    node_width: float = 10.0,
    gap: float = 6.0,
    margin: float = 24.0,
    label_space: float = 50.0,
    label_order: Sequence[str] | None = None,
    colors: dict[str, str] | None = None,
) -> SankeyLayout:
    """Place nodes and links for the given outcomes (both by default).

    ``label_order`` fixes the top-to-bottom order of actions in every column (default: most
    frequent first) and ``colors`` their colours (default: :func:`label_colors`); pass the same
    ones to several diagrams to make them comparable.
    """
    own = flows.labels()
    labels = tuple([lab for lab in label_order if lab in own] + [lab for lab in own if lab not in label_order]) if label_order else tuple(own)
    rank = {label: i for i, label in enumerate(labels)}
    counts: dict[tuple[int, str], int] = defaultdict(int)
    for (step, label, outcome), n in flows.nodes.items():
        if outcome in outcomes:
            counts[(step, label)] += n
    steps = max((s for s, _ in counts), default=0)
    columns = {s: sorted((lab for (t, lab) in counts if t == s), key=rank.__getitem__) for s in range(1, steps + 1)}
    busiest = max((sum(counts[(s, lab)] for lab in col) for s, col in columns.items()), default=1)
    most_nodes = max((len(col) for col in columns.values()), default=1)
    usable = max(height - 2 * margin - gap * (most_nodes - 1), 10.0)
    scale = usable / max(busiest, 1)
    span = width - 2 * margin - node_width - label_space
    nodes = []
    place: dict[tuple[int, str], SankeyNode] = {}
    for s, col in columns.items():
        x = margin + (span * (s - 1) / (steps - 1) if steps > 1 else span / 2)
        y = margin
        for lab in col:
            node = SankeyNode(s, lab, counts[(s, lab)], x, y, counts[(s, lab)] * scale)
            nodes.append(node)
            place[(s, lab)] = node
            y += node.height + gap
    order = {o: i for i, o in enumerate(outcomes)}
    selected = [(key, n) for key, n in flows.links.items() if key[3] in outcomes and n > 0]
    out_offset: dict[tuple[int, str], float] = defaultdict(float)
    in_offset: dict[tuple[int, str], float] = defaultdict(float)
    starts: dict[tuple[int, str, str, str], float] = {}
    for (s, a, b, o), n in sorted(selected, key=lambda kv: (kv[0][0], rank[kv[0][1]], rank[kv[0][2]], order[kv[0][3]])):
        starts[(s, a, b, o)] = place[(s, a)].y + out_offset[(s, a)]
        out_offset[(s, a)] += n * scale
    links = []
    for (s, a, b, o), n in sorted(selected, key=lambda kv: (kv[0][0], rank[kv[0][2]], rank[kv[0][1]], order[kv[0][3]])):
        target = place[(s + 1, b)]
        y1 = target.y + in_offset[(s + 1, b)]
        in_offset[(s + 1, b)] += n * scale
        source = place[(s, a)]
        links.append(SankeyLink(s, a, b, o, n, source.x + node_width, starts[(s, a, b, o)], target.x, y1, n * scale))
    trajectories = {o: int(flows.trajectories.get(o, 0)) for o in outcomes}
    palette = dict(colors) if colors else {}
    missing = [lab for lab in labels if lab not in palette]
    palette.update({k: v for k, v in label_colors(missing).items() if k not in palette})
    return SankeyLayout(width, height, node_width, tuple(nodes), tuple(links), labels, tuple(outcomes), trajectories, palette)


def link_path(link: SankeyLink) -> str:
    """The SVG path of a link band (two cubic curves)."""
    xm = (link.x0 + link.x1) / 2
    y0b, y1b = link.y0 + link.width, link.y1 + link.width
    return (
        f"M{link.x0:.1f},{link.y0:.1f} C{xm:.1f},{link.y0:.1f} {xm:.1f},{link.y1:.1f} {link.x1:.1f},{link.y1:.1f} "
        f"L{link.x1:.1f},{y1b:.1f} C{xm:.1f},{y1b:.1f} {xm:.1f},{y0b:.1f} {link.x0:.1f},{y0b:.1f} Z"
    )


def sankey_svg(layout: SankeyLayout, *, title: str = "") -> str:
    """The diagram as a standalone ``<svg>`` element (hover a band or node for its count)."""
    colors = layout.colors
    esc = html.escape
    legend_h = 22
    h = layout.height + legend_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="sankey" role="img" viewBox="0 0 {layout.width:.0f} {h:.0f}" '
        f'width="{layout.width:.0f}" height="{h:.0f}" font-family="sans-serif" font-size="10">',
        f"<title>{esc(title or 'action flows')}</title>",
    ]
    for link in layout.links:
        parts.append(
            f'<path d="{link_path(link)}" fill="{OUTCOME_COLORS.get(link.outcome, "#888")}" fill-opacity="0.40">'
            f"<title>step {link.step} {esc(link.source)} → {esc(link.target)}: {link.count} {esc(link.outcome)}</title></path>"
        )
    for node in layout.nodes:
        parts.append(
            f'<rect x="{node.x:.1f}" y="{node.y:.1f}" width="{layout.node_width:.1f}" height="{max(node.height, 0.5):.1f}" '
            f'fill="{colors[node.label]}"><title>step {node.step}: {esc(node.label)} ({node.count})</title></rect>'
        )
        if node.height >= 9:
            parts.append(
                f'<text x="{node.x + layout.node_width + 2:.1f}" y="{node.y + node.height / 2 + 3:.1f}">{esc(node.label)}</text>'
            )
    steps = sorted({n.step for n in layout.nodes})
    for s in steps:
        x = next(n.x for n in layout.nodes if n.step == s)
        parts.append(f'<text x="{x:.1f}" y="14" fill="#555">t={s}</text>')
    x = 8.0
    y = layout.height + 14
    for outcome in layout.outcomes:
        n = layout.trajectories.get(outcome, 0)
        parts.append(f'<rect x="{x:.0f}" y="{y - 9:.0f}" width="10" height="10" fill="{OUTCOME_COLORS.get(outcome, "#888")}" fill-opacity="0.6"/>')
        parts.append(f'<text x="{x + 14:.0f}" y="{y:.0f}">{esc(outcome)} ({n})</text>')
        x += 110
    parts.append("</svg>")
    return "".join(parts)
