"""One retrieve's questions about its candidates, answered by one statement (``Store.candidate_facts``).

Ranking asked them one call each: the prior (salience among what matched the content) and the
semantic score of what the other lanes found (cosine with the stored vector). The statement is
the two reads side by side (``UNION ALL``), each one index scan over its sorted labels
(``label = ANY(...)``): PostgreSQL walks the b-tree once, in label order, instead of one index
descent per label in a nested loop (0.28 instead of 0.35 ms of server time for ~90 + ~40
labels at 100k memories, benchmarks/results/postgres.md). The answers are the separate calls'
own: the same score expressions (``reads.SALIENCE_SCORE``, ``1 - (vec <=> q)`` as
``PgVectors.vector_scores``), the same filters, the same order. The labels travel as array
literals (``db.int_array``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mempager.errors import InvalidInput
from mempager.protocols import CandidateAsk, CandidateFacts
from mempager.store.pg.db import Db, int_array
from mempager.store.pg.reads import HALF_CASES, SALIENCE_SCORE, SALIENT, salience_values
from mempager.store.pg.vectype import PgVector

# a row of the prior has its salience in the second column, a row of the cosines its score in the third
_PRIOR = (
    f"SELECT label, {SALIENCE_SCORE.format(m='', half=HALF_CASES)}, NULL::float8 FROM memories"
    f" WHERE actor = %(actor)s AND label = ANY(%(prior)s::text::bigint[]) AND {SALIENT.format(m='')}"
)
_COSINE = (
    "SELECT label, NULL::float8, 1 - (vec <=> %(q)b) FROM vectors"
    " WHERE actor = %(actor)s AND model = %(model)s AND label = ANY(%(cosine)s::text::bigint[])"
)
_STATEMENTS = {(True, True): f"{_PRIOR} UNION ALL {_COSINE}", (True, False): _PRIOR, (False, True): _COSINE}


def candidate_facts(db: Db, actor: str, ask: CandidateAsk) -> CandidateFacts:
    """``ask`` answered in one statement (none when nothing is asked)."""
    if ask.prior and ask.params is None:
        raise InvalidInput("a CandidateAsk with prior labels needs the salience params")
    prior_labels = sorted({int(label) for label in ask.prior})
    cosine_labels = sorted({int(label) for label in ask.cosine}) if ask.vector is not None else []
    if not prior_labels and not cosine_labels:
        return CandidateFacts([], {})
    values: dict[str, Any] = {"actor": actor}
    if prior_labels and ask.params is not None:
        values.update(salience_values(ask.params, ask.types))
        values["prior"] = int_array(prior_labels)
    if cosine_labels:
        values["q"] = PgVector(np.asarray(ask.vector, dtype=np.float32).reshape(-1))
        values["model"] = ask.model
        values["cosine"] = int_array(cosine_labels)
    prior: list[tuple[int, float]] = []
    found: dict[int, float] = {}
    for label, salience, similarity in db.rows(
        _STATEMENTS[bool(prior_labels), bool(cosine_labels)], values, binary=True
    ):
        if salience is not None:
            prior.append((int(label), float(salience)))
        if similarity is not None:
            found[int(label)] = float(similarity)
    prior.sort(key=lambda hit: (-hit[1], -hit[0]))  # salience's ORDER BY score DESC, label DESC
    # the cosines in the order the labels were asked (the prior's first, as one list of both
    # parts did before): the same dict, entry for entry, as the separate calls' answers
    scores: dict[int, float] = {}
    for label in (*ask.prior, *ask.cosine) if found else ():
        score = found.get(int(label))
        if score is not None:
            scores.setdefault(int(label), score)
    return CandidateFacts(prior[: len(ask.prior)], scores)
