"""The association graph laid out for an inline SVG: a deterministic force-directed layout.

Fruchterman-Reingold with a fixed seed, so the same graph is drawn the same way on every load
(and in the README's screenshot). Only the strongest links are drawn: a page is not a graph tool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mempager.protocols import AssociationLink
from mempager.types import Memory

MAX_EDGES = 80
SIZE = 560
MARGIN = 40
LABEL_ROOM = 150
ITERATIONS = 120
GRAVITY = 2.0  # pull toward the centre: without it unlinked clusters drift to the corners


@dataclass(frozen=True, slots=True)
class Node:
    x: float
    y: float
    name: str  # the memory id
    uri: str
    text: str  # the memory's first words, for the tooltip
    short: str  # fewer of them, for the label
    degree: int


@dataclass(frozen=True, slots=True)
class Edge:
    x1: float
    y1: float
    x2: float
    y2: float
    width: float
    strength: float
    affect: str | None


@dataclass(frozen=True, slots=True)
class GraphView:
    size: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    total_links: int


def layout(links: Sequence[AssociationLink], memories: Mapping[int, Memory], size: int = SIZE) -> GraphView:
    """The strongest ``MAX_EDGES`` links between memories that still exist, laid out in a square."""
    kept = [k for k in links if k.a in memories and k.b in memories][:MAX_EDGES]
    labels = sorted({x for k in kept for x in (k.a, k.b)})
    if not labels:
        return GraphView(size, (), (), len(links))
    index = {label: i for i, label in enumerate(labels)}
    pos = _forces(len(labels), [(index[k.a], index[k.b]) for k in kept])
    # the right margin is wider: each node's label is drawn to its right
    span = np.array([size - MARGIN - LABEL_ROOM, size - 2 * MARGIN])
    xy = MARGIN + span * (pos - pos.min(axis=0)) / np.maximum(np.ptp(pos, axis=0), 1e-9)
    degree = {label: 0 for label in labels}
    for k in kept:
        degree[k.a] += 1
        degree[k.b] += 1
    nodes = tuple(
        Node(
            round(float(xy[i, 0]), 1),
            round(float(xy[i, 1]), 1),
            memories[label].id,
            memories[label].uri,
            " ".join(memories[label].text.split())[:120],
            _short(memories[label].text),
            degree[label],
        )
        for i, label in enumerate(labels)
    )
    strongest = max(k.strength for k in kept) or 1.0
    edges = tuple(
        Edge(
            nodes[index[k.a]].x,
            nodes[index[k.a]].y,
            nodes[index[k.b]].x,
            nodes[index[k.b]].y,
            round(0.8 + 3.2 * k.strength / strongest, 2),
            k.strength,
            k.affect_tag,
        )
        for k in kept
    )
    return GraphView(size, nodes, edges, len(links))


def _short(text: str, limit: int = 24) -> str:
    words = " ".join(text.split())
    return words if len(words) <= limit else words[: limit - 1] + "…"


def _forces(n: int, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """Node positions: attraction along links, repulsion between all nodes, cooling steps."""
    rng = np.random.default_rng(7)
    pos = rng.uniform(-1.0, 1.0, size=(n, 2))
    if n == 1:
        return pos
    k = 1.0 / np.sqrt(n)
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    temperature = 0.2
    for _ in range(ITERATIONS):
        delta = pos[:, None, :] - pos[None, :, :]
        dist = np.maximum(np.linalg.norm(delta, axis=2), 1e-3)
        move = (delta / dist[..., None] * (k * k / dist)[..., None]).sum(axis=1)
        pull = pos[a] - pos[b]
        length = np.maximum(np.linalg.norm(pull, axis=1), 1e-3)
        force = pull / length[:, None] * (length * length / k)[:, None]
        np.add.at(move, a, -force)
        np.add.at(move, b, force)
        move -= pos * GRAVITY * np.linalg.norm(pos, axis=1)[:, None]  # keeps separate clusters in view
        norm = np.maximum(np.linalg.norm(move, axis=1), 1e-9)
        pos += move / norm[:, None] * np.minimum(norm, temperature)[:, None]
        temperature *= 0.97
    return pos
