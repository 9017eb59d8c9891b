"""One retrieve's questions about its candidates, answered by one statement (``Store.candidate_facts``).

Ranking asked them one call each: the prior (salience among what matched the content) and the
semantic score of what the other lanes found (cosine with the stored vector). Each label goes in
once, with a bit mask of what is asked of it, and comes back with the asked columns filled. The
answers are the separate calls' own: the same score expressions (``reads.SALIENCE_SCORE``,
``1 - (vec <=> q)`` as ``PgVectors.vector_scores``), the same filters, the same order.
The labels and their masks travel as array literals (``db.int_array``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mempager.errors import InvalidInput
from mempager.protocols import CandidateAsk, CandidateFacts
from mempager.store.pg.db import Db, int_array
from mempager.store.pg.reads import HALF_CASES, SALIENCE_SCORE, SALIENT, salience_values
from mempager.store.pg.vectype import PgVector

PRIOR, COSINE = 1, 2  # what is asked of a label (its bit in ``want``)
_SCORE = SALIENCE_SCORE.format(m="m.", half=HALF_CASES)
_PRIOR = f"CASE WHEN c.want & {PRIOR} <> 0 AND {SALIENT.format(m='m.')} THEN {_SCORE} END"
# a sub-select under CASE: only the labels asked for a cosine look their vector up
_COSINE = (
    f"CASE WHEN c.want & {COSINE} <> 0 THEN (SELECT 1 - (v.vec <=> %(q)b) FROM vectors v"
    " WHERE v.label = c.label AND v.model = %(model)s AND v.actor = %(actor)s) END"
)


def _statement(prior: bool, cosine: bool) -> str:
    return (
        f"SELECT c.label, {_PRIOR if prior else 'NULL::float8'}, {_COSINE if cosine else 'NULL::float8'}"
        " FROM unnest(%(labels)s::text::bigint[], %(want)s::text::int[]) AS c(label, want)"
        + (" LEFT JOIN memories m ON m.label = c.label AND m.actor = %(actor)s" if prior else "")
    )


_STATEMENTS = {(prior, cosine): _statement(prior, cosine) for prior in (False, True) for cosine in (False, True)}


def candidate_facts(db: Db, actor: str, ask: CandidateAsk) -> CandidateFacts:
    """``ask`` answered in one statement (none when nothing is asked)."""
    if ask.prior and ask.params is None:
        raise InvalidInput("a CandidateAsk with prior labels needs the salience params")
    cosine = ask.vector is not None and bool(ask.cosine)
    want: dict[int, int] = dict.fromkeys((int(label) for label in ask.prior), PRIOR)
    for label in ask.cosine if cosine else ():
        want[int(label)] = want.get(int(label), 0) | COSINE
    if not want:
        return CandidateFacts([], {})
    values: dict[str, Any] = {
        "actor": actor,
        "labels": int_array(list(want)),
        "want": int_array(list(want.values())),
    }
    if ask.prior and ask.params is not None:
        values.update(salience_values(ask.params, ask.types))
    if cosine:
        values["q"] = PgVector(np.asarray(ask.vector, dtype=np.float32).reshape(-1))
        values["model"] = ask.model
    prior: list[tuple[int, float]] = []
    scores: dict[int, float] = {}
    for label, salience, similarity in db.rows(_STATEMENTS[bool(ask.prior), cosine], values, binary=True):
        if salience is not None:
            prior.append((int(label), float(salience)))
        if similarity is not None:
            scores[int(label)] = float(similarity)
    prior.sort(key=lambda hit: (-hit[1], -hit[0]))  # salience's ORDER BY score DESC, label DESC
    return CandidateFacts(prior[: len(ask.prior)], scores)
