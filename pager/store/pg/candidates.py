"""One retrieve's questions about its candidates, answered by one statement (``Store.candidate_facts``).

Ranking asked them one call each: the prior (salience among what matched the content) and the
semantic score of what the other lanes found (cosine with the stored vector). The statement is
the reads side by side (``UNION ALL``), each one index scan over its sorted labels
(``label = ANY(...)``): PostgreSQL walks the b-tree once, in label order, instead of one index
descent per label in a nested loop (0.28 instead of 0.35 ms of server time for ~90 + ~40
labels at 100k memories, benchmarks/results/postgres.md). The answers are the separate calls'
own: the same score expressions (``reads.SALIENCE_SCORE``, ``1 - (vec <=> q)`` as
``PgVectors.vector_scores``), the same filters, the same order. The labels travel as array
literals (``db.int_array``).

The same rows of ``memories`` also bring what packing reads of each candidate (``rows.SHOWN_COLUMNS``):
the memories a retrieve packs are nearly always among the candidates it asked about here (all
16 of the first chunk, in each of the 600 questions of benchmarks/bench_postgres.py), so its
packing read (``Store.shown_rows``, a round trip of its own) is answered from them
(``Prefetched``); a label not asked about is read as before. Decoding the ~90 rows' packing
columns costs ~0.1 ms of client time, the round trip it saves 0.2-0.5 ms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from mempager.errors import InvalidInput
from mempager.protocols import CandidateAsk, CandidateFacts
from mempager.store.pg.db import Db, int_array
from mempager.store.pg.reads import HALF_CASES, SALIENCE_SCORE, SALIENT, salience_values
from mempager.store.pg.rows import SHOWN_COLUMNS, ShownRow
from mempager.store.pg.vectype import PgVector

PREFETCH_S = 0.5  # how long a retrieve's candidate rows may serve its own packing read
_SHOWN = SHOWN_COLUMNS.removeprefix("label, ")  # columns 3.. of a memory's row
_NO_SHOWN = "NULL::text, NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::text, NULL::timestamptz"
# Every row: label, salience (the prior's rows), cosine (the vectors' rows), then the packing
# columns (the memories' rows; their id is never NULL, a vector's row has NULL there). A prior
# label that salience does not rank (another type, superseded, expired) still comes, without a
# salience: packing reads it too.
_PRIOR = (
    f"SELECT label, CASE WHEN {SALIENT.format(m='')} THEN {SALIENCE_SCORE.format(m='', half=HALF_CASES)} END,"
    f" NULL::float8, {_SHOWN} FROM memories WHERE actor = %(actor)s AND label = ANY(%(prior)s::text::bigint[])"
)
_OTHERS = (  # the cosine labels that are not prior labels: their packing columns alone
    f"SELECT label, NULL::float8, NULL::float8, {_SHOWN} FROM memories"
    " WHERE actor = %(actor)s AND label = ANY(%(others)s::text::bigint[])"
)
_COSINE = (
    f"SELECT label, NULL::float8, 1 - (vec <=> %(q)b), {_NO_SHOWN} FROM vectors"
    " WHERE actor = %(actor)s AND model = %(model)s AND label = ANY(%(cosine)s::text::bigint[])"
)
_STATEMENTS = {
    (True, True): f"{_PRIOR} UNION ALL {_OTHERS} UNION ALL {_COSINE}",
    (True, False): _PRIOR,
    (False, True): f"{_OTHERS} UNION ALL {_COSINE}",
}
Row = tuple[Any, ...]


def candidate_facts(db: Db, actor: str, ask: CandidateAsk) -> tuple[CandidateFacts, set[int], dict[int, Row]]:
    """``ask`` answered in one statement (none when nothing is asked), with the labels whose
    memory rows it read and those rows (a label without one has no memory of ``actor``)."""
    if ask.prior and ask.params is None:
        raise InvalidInput("a CandidateAsk with prior labels needs the salience params")
    prior_labels = sorted({int(label) for label in ask.prior})
    cosine_labels = sorted({int(label) for label in ask.cosine}) if ask.vector is not None else []
    if not prior_labels and not cosine_labels:
        return CandidateFacts([], {}), set(), {}
    values: dict[str, Any] = {"actor": actor}
    if prior_labels and ask.params is not None:
        values.update(salience_values(ask.params, ask.types))
        values["prior"] = int_array(prior_labels)
    asked = set(prior_labels)
    if cosine_labels:
        others = [label for label in cosine_labels if label not in asked]
        asked.update(others)
        values["q"] = PgVector(np.asarray(ask.vector, dtype=np.float32).reshape(-1))
        values["model"] = ask.model
        values["cosine"] = int_array(cosine_labels)
        values["others"] = int_array(others)
    prior: list[tuple[int, float]] = []
    found: dict[int, float] = {}
    shown: dict[int, Row] = {}
    for row in db.rows(_STATEMENTS[bool(prior_labels), bool(cosine_labels)], values, binary=True):
        label, salience, similarity = int(row[0]), row[1], row[2]
        if row[3] is None:  # a vector's row
            if similarity is not None:
                found[label] = float(similarity)
            continue
        shown[label] = row
        if salience is not None:
            prior.append((label, float(salience)))
    prior.sort(key=lambda hit: (-hit[1], -hit[0]))  # salience's ORDER BY score DESC, label DESC
    # the cosines in the order the labels were asked (the prior's first, as one list of both
    # parts did before): the same dict, entry for entry, as the separate calls' answers
    scores: dict[int, float] = {}
    for label in (*ask.prior, *ask.cosine) if found else ():
        score = found.get(int(label))
        if score is not None:
            scores.setdefault(int(label), score)
    return CandidateFacts(prior[: len(ask.prior)], scores), asked, shown


class Prefetched:
    """The packing rows this thread's last ``candidate_facts`` read, for its retrieve's ``shown_rows``.

    They serve only that retrieve: a thread's lexical search (the start of every ranking) drops
    them (``forget``), so do this process's commits (its own writes are always seen) and
    ``PREFETCH_S``. Within it they answer as a read of its own would have, but for commits racing
    the retrieve, which no read promises to see either.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def keep(self, actor: str, commits: int, asked: set[int], rows: dict[int, Row]) -> None:
        """``rows``, read for ``actor`` after this process had committed ``commits`` transactions."""
        self._local.kept = (actor, commits, time.monotonic(), asked, rows)

    def forget(self) -> None:
        self._local.kept = None

    def take(self, actor: str, commits: int, labels: Iterable[int]) -> tuple[dict[int, ShownRow], list[int]]:
        """The packing rows of ``labels`` held for ``actor``, and the labels to read (all of them
        when nothing valid is held)."""
        kept = getattr(self._local, "kept", None)
        labels = [int(label) for label in labels]
        if kept is None or kept[0] != actor or kept[1] != commits or time.monotonic() - kept[2] >= PREFETCH_S:
            return {}, labels
        _, _, _, asked, rows = kept
        held: dict[int, ShownRow] = {}
        for label in labels:
            row = rows.get(label)
            if row is not None:
                held[label] = ShownRow(actor, (label, *row[3:]))
        return held, [label for label in labels if label not in asked]
