"""A picture of one subgraph like the paper's Fig. 6, so users can see what the Proposer gets.

The target path runs left to right (seed gold-bordered, waypoints marked with diamonds, answer
green); distractor branches hang above and below their divergence node in grey with dashed
edges; every edge carries its relation label. Positions are computed, not random, so the same
subgraph always gives the same picture.
"""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

from ..core.artefacts import write_report
from ..core.subgraph import Subgraph

logger = logging.getLogger(__name__)

__all__ = ["subgraph_layout", "plot_subgraph"]

_DX = 3.0
_BRANCH_DX = 2.2
_BRANCH_DY = 1.6


def subgraph_layout(sg: Subgraph) -> dict[str, tuple[float, float]]:
    """Deterministic node positions: the path on y=0 left to right, distractor branches alternately
    above and below it (further out for each extra branch on the same side of the same node)."""
    pos: dict[str, tuple[float, float]] = {n: (i * _DX, 0.0) for i, n in enumerate(sg.path)}
    used: dict[tuple[int, float], int] = {}
    for bi, br in enumerate(sg.distractors):
        sign = 1.0 if bi % 2 == 0 else -1.0
        level = used.get((br.diverge_at, sign), 0) + 1
        used[(br.diverge_at, sign)] = level
        x0 = br.diverge_at * _DX
        for m, node in enumerate(br.nodes):
            if node not in pos:
                pos[node] = (x0 + _BRANCH_DX * 0.6 * (m + 1), sign * _BRANCH_DY * (level + m * 0.7))
    return pos


#: node roles: legend label, face colour, edge colour, marker (Fig. 6's scheme)
_ROLES = (
    ("seed v0 (waypoint)", "#FFF4CC", "#D4A017", "D"),
    ("waypoint", "#DCE9F7", "#4C72B0", "D"),
    ("answer: {answer}", "#DFF2DF", "#2E8B57", "o"),
    ("distractor", "#EEEEEE", "#9A9A9A", "o"),
)


def plot_subgraph(sg: Subgraph, png_path, *, title: str | None = None) -> Path:
    """Draw ``sg`` into ``png_path`` (PNG) with the Fig. 6 colour scheme; returns the path written. The PNG is
    written whole and never over another kind of file (:func:`~searchgym.core.artefacts.write_report`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pos = subgraph_layout(sg)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    width = max(6.0, 1.9 * (max(xs) - min(xs)) / _DX + 3)
    height = max(3.5, 1.3 * (max(ys) - min(ys)) + 3)
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_axis_off()
    _draw_graph(sg, pos, ax)
    ax.legend(handles=_legend(sg), loc="upper left", fontsize=8, frameon=False, bbox_to_anchor=(0, 1.02))
    ax.margins(0.12, 0.25)
    ax.set_title(
        title
        or f"{sg.id}: {sg.hops}-hop path, {len(sg.distractors)} distractor branch(es), answer type {sg.answer_type}",
        fontsize=10,
    )
    fig.tight_layout()
    return write_report(png_path, "PNG figure", lambda tmp: fig.savefig(tmp, format="png"))


def _draw_graph(sg: Subgraph, pos: dict, ax) -> None:
    """The subgraph's nodes (by role), path edges solid, branch edges dashed, relation labels on the edges
    and titles on the nodes."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(sg.nodes)
    path_edges: list[tuple[str, str]] = []
    branch_edges: list[tuple[str, str]] = []
    labels: dict[tuple[str, str], str] = {}
    for i, e in enumerate(sg.edges()):
        g.add_edge(e.head, e.tail)
        (path_edges if i < sg.hops else branch_edges).append((e.head, e.tail))
        labels[(e.head, e.tail)] = textwrap.fill(e.relation, 18)
    _draw_nodes(sg, g, pos, ax)
    nx.draw_networkx_edges(
        g, pos, edgelist=path_edges, width=2.0, edge_color="#333333", arrows=True, arrowsize=16, node_size=2600, ax=ax
    )
    if branch_edges:
        nx.draw_networkx_edges(
            g,
            pos,
            edgelist=branch_edges,
            width=1.2,
            edge_color="#9A9A9A",
            style="dashed",
            arrows=True,
            arrowsize=12,
            node_size=2600,
            ax=ax,
        )
    nx.draw_networkx_edge_labels(
        g,
        pos,
        edge_labels=labels,
        font_size=7,
        ax=ax,
        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
    )
    names = {n: textwrap.fill(node.title, 14)[:60] for n, node in sg.nodes.items()}
    nx.draw_networkx_labels(g, pos, labels=names, font_size=7, ax=ax)


def _role_nodes(sg: Subgraph) -> tuple[list[str], ...]:
    """The nodes of each role in :data:`_ROLES` order: seed, waypoints, answer, distractors."""
    on_path = set(sg.path)
    return [sg.path[0]], sg.path[1:-1], [sg.path[-1]], [n for n in sg.nodes if n not in on_path]


def _draw_nodes(sg: Subgraph, g, pos: dict, ax) -> None:
    """The nodes, coloured and shaped by role (:data:`_ROLES`)."""
    import networkx as nx

    for nodes, (_, face, edge, shape) in zip(_role_nodes(sg), _ROLES):
        if nodes:
            nx.draw_networkx_nodes(
                g,
                pos,
                nodelist=nodes,
                node_color=face,
                edgecolors=edge,
                linewidths=2.5,
                node_size=2600,
                node_shape=shape,
                ax=ax,
            )


def _legend(sg: Subgraph) -> list:
    """Legend entries of the node roles (the answer's names the answer)."""
    from matplotlib.lines import Line2D

    return [
        Line2D([], [], marker=shape, ls="", mfc=face, mec=edge, mew=2, ms=10, label=label.format(answer=sg.answer))
        for label, face, edge, shape in _ROLES
    ]
