"""The DuckDB tiers keep their reads until the next tier write (store/tiers.py): a page makes no
store read for crystals and spores that did not change, and every write is seen at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mempager
from mempager import PagerConfig


def test_pages_reread_the_tiers_only_after_a_write(tmp_path: Path) -> None:
    with mempager.open(tmp_path / "t.duckdb", actor="neo", config=PagerConfig(embedder="hash")) as p:
        p.remember_fact("the deploy key is in vault")
        tiers = p.store.tiers
        queries: list[str] = []
        fetch = tiers.db.fetch

        def counted(sql: str, params: Any = None) -> Any:
            if "FROM crystals" in sql or "FROM spores" in sql:  # the tiers' reads (workers use fetch too)
                queries.append(sql)
            return fetch(sql, params)

        tiers.db.fetch = counted
        p.page("where is the deploy key")
        first = len(queries)
        assert first >= 1  # the first page read the tiers
        p.page("where is the deploy key")
        assert len(queries) == first  # nothing changed: the tiers answer from what they kept
        spore = p.spore("ask about the vault rotation", cue="vault")
        assert "vault rotation" in p.page("the vault key").render()  # a write is seen by the next page
        assert len(queries) > first
        p.complete_spore(spore.id)
        assert "vault rotation" not in p.page("the vault key").render()
        assert [s.id for s in p.spores("done")] == [spore.id]
        again = p.spore("renew the TLS cert", cue="vault")
        p.drop_spore(again.id)
        assert "TLS cert" not in p.page("the vault key").render() and p.spores() == []
