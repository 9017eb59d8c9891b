"""A forced embedder that is down when a PostgreSQL store opens: the store still opens and catches up.

The same scenario as tests/pager/test_embedder_outage.py on the server store, where the model is
registered in the database (its width unknown until the first vectors) so writes queue for it.
"""

from __future__ import annotations

import mempager
from mempager.embedders.testing import EmbeddingServer, Reply

from ..embedders.conftest import hash_server  # noqa: F401 - the fixture
from ..pager.test_embedder_outage import (
    FAST,
    NAME,
    N,
    assert_found_without_the_semantic_lane,
    facts,
    gateway_env,
    wait_for,
)


def test_forced_embedder_down_at_open_on_postgres(pg_url: str, hash_server: EmbeddingServer) -> None:  # noqa: F811
    hash_server.break_with(Reply(status=503))  # the boot probe fails; no width is configured
    with mempager.open(pg_url, actor="neo", config=FAST, environ=gateway_env(hash_server.url)) as p:
        gateway = next(c for c in p.stats()["embedder_candidates"] if c["kind"] == "gateway")
        assert gateway["status"] == "down", gateway
        uris = facts(p)
        wait_for(lambda: p.stats()["failing_embeddings"] == N, "the failures to be recorded")
        assert p.store.vector_models("neo") == {}
        assert_found_without_the_semantic_lane(p, uris[2], "rotation code for vault 2")
        hash_server.heal()
        assert p.sync(timeout=60)
        assert p.store.vector_models("neo") == {NAME: N}
        assert "semantic" in {s.uri: s for s in p.retrieve("rotation code for vault 2", k=5)}[uris[2]].lanes
