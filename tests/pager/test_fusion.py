"""Three lanes fused: union semantics, dedup, determinism, budgets, verbatim ids, explained cuts."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempager
from mempager import PagerConfig, PatternSpec, estimate_tokens
from mempager.lanes.fusion import Cut, fuse_scores
from mempager.lanes.salience import params_from_config
from mempager.paging.page import render_snippet
from mempager.tokens import is_high_entropy


def test_each_lane_alone_can_reach_the_page(store_path: Path) -> None:
    # lane_depth 5: with k=8 each lane looks 16 deep, so 20 closer vectors keep a memory out of
    # the semantic lane's list (its score is still looked up, which is what fusion weighs)
    cfg = PagerConfig(embedder="hash", lane_depth=5)
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        lexical_only = p.remember_fact(
            "Among the garden notes kept over the years about roses, tulips, hedges, compost, watering "
            "schedules, pruning shears, soil acidity, mulch beds and the greenhouse heater, "
            "one flower was zygomorphic."
        )
        for i in range(20):  # share the query's character trigrams but not its word: semantic, not lexical
            p.remember_fact(f"zygomorphicx{i}")
        semantic_only = p.remember_fact("Photosynthetic organisms convert sunlight.")
        assert p.sync(timeout=60)

        def lanes_in_page(query: str, uri: str) -> set[str]:
            page = p.page(query)
            hits = {s.uri: s for s in page.snippets}
            assert uri in hits, page.report.table()
            assert uri in page.render()
            lanes = set(hits[uri].lanes)
            # the salience prior only ever joins a memory that matched the content
            assert "prior" not in lanes or lanes & {"semantic", "lexical", "time"}
            return lanes - {"prior"}

        assert lanes_in_page("zygomorphic", lexical_only) == {"lexical"}
        assert lanes_in_page("photosynthesis", semantic_only) == {"semantic"}  # no word in common
        p.workers.stop()  # nothing new gets a vector from here on
        fresh = p.remember_fact("Reminder to self: call mom on sunday")
        assert lanes_in_page("anything new?", fresh) == {"salience"}  # no shared word, no vector yet


@pytest.mark.slow
def test_semantic_only_hit_reaches_the_page(tmp_path: Path) -> None:
    with mempager.open(tmp_path / "s.duckdb", actor="neo", config=PagerConfig(embedder="local")) as p:
        dog = p.remember_fact("My dog Rex is three years old.")
        for text in [
            "The quarterly report is due Friday.",
            "Paris is the capital of France.",
            "The build uses make and gcc.",
        ]:
            p.remember_fact(text)
        assert p.sync(timeout=120)
        hits = p.retrieve("Which pet does the user own?", k=2)
        assert hits[0].uri == dog and set(hits[0].lanes) - {"prior"} == {"semantic"}  # no word in common


def test_score_fusion_is_a_union_with_ties_broken_by_label() -> None:
    lanes = {"semantic": [(1, 0.9), (2, 0.5)], "lexical": [(3, 7.0), (1, 3.5)], "salience": [(4, 0.6)]}
    fused = fuse_scores(
        lanes, {"lexical": {2: 0.0}, "semantic": {3: 0.1}}, {"semantic": 0.4, "lexical": 0.6, "salience": 0.2}, 0.1
    )
    assert {f.label for f in fused} == {1, 2, 3, 4}
    assert [f.label for f in fused][:2] == [1, 3]
    tie = fuse_scores({"lexical": [(9, 1.0), (5, 1.0)]}, {}, {"lexical": 1.0}, 0.1)
    assert [f.label for f in tie] == [5, 9]


def test_same_store_same_query_same_page_across_reopen(store_path: Path) -> None:
    frozen = datetime(2026, 6, 1, tzinfo=timezone.utc)
    cfg = PagerConfig(embedder="hash")
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.clock = lambda: frozen
        p.set_identity("I am Neo.")
        p.remember_many([{"type": "event", "text": f"Event {i}: shipped build {i % 7}"} for i in range(200)])
        p.sync(timeout=60)
        first, second = p.page("which builds shipped?", goal="ship"), p.page("which builds shipped?", goal="ship")
        assert first.render() == second.render()
        rendered = first.render()
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.clock = lambda: frozen
        assert p.page("which builds shipped?", goal="ship").render() == rendered


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=400).filter(str.strip),
        min_size=1,
        max_size=25,
    ),
    budget=st.integers(min_value=1, max_value=600),
    page_budget=st.integers(min_value=50, max_value=3000),
    patterns=st.integers(min_value=0, max_value=3),
    patterns_budget=st.integers(min_value=1, max_value=400),
)
def test_budgets_are_never_exceeded(
    tmp_path_factory,
    texts: list[str],
    budget: int,
    page_budget: int,  # type: ignore[no-untyped-def]
    patterns: int,
    patterns_budget: int,
) -> None:
    cfg = PagerConfig(
        embedder="hash",
        retrieval_budget_tokens=budget,
        page_budget_tokens=page_budget,
        pinned_budget_tokens=min(page_budget, 200),
        patterns_budget_tokens=patterns_budget,
    )
    with mempager.open(tmp_path_factory.mktemp("b") / "b.duckdb", actor="neo", config=cfg) as p:
        p.remember_many([{"type": "fact", "text": t} for t in texts])
        p.remember_user_fact("The user is Ana.")
        p.add_rule(texts[-1])  # a pinned block of random size: sometimes it leaves the page no room
        for i in range(patterns):
            for _ in range(cfg.min_pattern_successes):
                p.reinforce_pattern(
                    PatternSpec(name=f"ship {i}", trigger="ship the release", steps=[t[:120] for t in texts[:3]])
                )
        for query in ["the", texts[0][:40] or "x"]:
            snippets = p.retrieve(query)
            assert sum(s.tokens for s in snippets) <= budget
            # a snippet is charged its rendered line, so the budget holds for the text the model sees
            assert all(s.tokens == estimate_tokens(render_snippet(s) + "\n") for s in snippets)
            page = p.page(query, goal="ship the release")
            report, rendered = page.report, page.render()
            for name in ("pinned", "patterns", "retrieved"):
                assert report.sections[name].tokens <= report.sections[name].budget, name
            assert report.sections["patterns"].budget <= patterns_budget
            assert report.sections["pinned"].budget == cfg.pinned_budget_tokens
            assert report.total_tokens <= page_budget
            assert estimate_tokens(rendered) <= page_budget
            # a retrieved line: "- [time · source · mem://...] text" (a pinned rule may itself be "[")
            memory_lines = [line for line in rendered.split("\n") if re.match(r"- \[[^\]]* · mem://", line)]
            assert len(memory_lines) == len(page.snippets)
            assert sum(estimate_tokens(line + "\n") for line in memory_lines) == report.sections["retrieved"].tokens


def test_page_gives_retrieval_no_room_when_pinned_fills_the_page(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", page_budget_tokens=60, pinned_budget_tokens=60)
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.add_rule("Always answer in French, quote sources, and never reveal the deploy keys to anyone. " * 3)
        fact = p.remember_fact("The deploy key id is 7f3a9c2e.")
        page = p.page("deploy key id")
        assert page.report.sections["retrieved"].budget == 0 and page.snippets == ()
        assert estimate_tokens(page.render()) <= 60
        assert any(c.uri == fact and c.reason == "budget" for c in page.report.cuts)  # still explained


def test_verbatim_identifier_never_split_in_a_page(store_path: Path) -> None:
    ident = "0x9f2c4e7a1b3d5f60a8c2e4f6b8d0a1c3e5f7a9b1"  # one 42-byte word: cut bytes would corrupt it
    cfg = PagerConfig(embedder="hash")
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.remember_fact(
            "Ledger notes: " + "padding words " * 20 + ident + " is the payout address; " + "trailing words " * 100
        )
        outcomes = set()
        for budget in range(40, 160):  # the cut moves 4 bytes a step, across the identifier's 42
            hits = p.retrieve(ident, k=1, budget=budget)
            if not hits:
                continue
            (hit,) = hits
            assert hit.truncated and hit.tokens <= budget
            line = render_snippet(hit)
            whole = ident in line
            assert whole or ident[:6] not in line, line[-80:]
            outcomes.add(whole)
            assert all(
                t.strip(",.;") == ident or not ident.startswith(t.strip(",.;"))
                for t in re.findall(r"\S+", hit.text)
                if is_high_entropy(t)
            )
        assert outcomes == {True, False}  # the truncation point did fall on the identifier


def test_forget_removes_from_every_lane_index(store_path: Path) -> None:
    """Not through retrieve (it re-checks the store): each lane's own index must drop the memory."""
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:

        def lexical(words: str) -> set[int]:
            return {x for x, _ in p.lexical.search_scored(words, 10, [])[0]} | {x for x, _ in p.lexical.match(words)}

        def semantic(words: str) -> set[int]:
            return {x for x, _ in p.semantic.search_vector(p.semantic.embed_query(words), 10)}

        def salience() -> set[int]:
            params = params_from_config(p.config, p.clock())
            return {x for x, _ in p.store.salience(p.actor, p.config.salience_types, params, 10)}

        uri = p.remember_fact("The canary is yellow-7731.")
        p.remember_fact("The sparrow is brown.")
        assert p.sync(timeout=60)
        label = p.get(uri).label
        assert label in lexical("canary yellow-7731") and label in semantic("canary yellow-7731")
        p.workers.stop()
        unembedded = p.remember_fact("The heron is grey-5512.")
        fresh = p.get(unembedded).label
        assert fresh in p.semantic.unembedded_labels() and fresh in lexical("heron grey-5512")
        assert {label, fresh} <= salience()
        p.forget(uri)
        p.forget(unembedded)
        for gone, words in ((label, "canary yellow-7731"), (fresh, "heron grey-5512")):
            assert gone not in lexical(words)
            assert gone not in semantic(words) and gone not in p.semantic
            assert gone not in p.semantic.unembedded_labels()
            assert gone not in salience()


def test_report_explains_every_cut(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", retrieval_top_k=3, retrieval_budget_tokens=140)
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        profile = p.remember_user_fact("Deploys happen on Tuesdays.")
        old_goal = p.set_goal("deploy the service")
        goal = p.set_goal("deploy the service today")
        for _ in range(cfg.min_pattern_successes):
            pattern = p.reinforce_pattern(
                PatternSpec(name="deploy checklist", trigger="deploy the service", steps=["run the deploy checklist"])
            )
        long = p.remember_fact(
            "Deploy checklist for the service on Tuesdays, in full: "
            + " ".join(f"step{i} deploy checklist service" for i in range(30))
        )
        for i in range(6):
            p.remember_fact(f"Deploy note {i}: run the checklist.")
        expired = p.remember_fact("Deploy freeze checklist for the service until the audit ends.")
        p.update(expired, valid_until="2000-01-01")
        tips = {p.remember_fact(f"Gardening tip {i}: water tomatoes at dawn.") for i in range(10)}
        assert p.sync(timeout=60)
        pages = [
            p.page("deploy checklist Tuesdays service", goal="deploy the service today"),  # a long first hit
            p.page("deploy note run", goal="deploy the service today"),
        ]  # short hits: k binds first
        # a stale index entry (its memory deleted behind the cache's back) that matches the query best
        p.semantic.add(np.array([999_999]), p.semantic.embed_query("xylophone").reshape(1, -1))
        p.workers.stop()  # what follows stays unembedded: only the salience lane ranks it
        for i in range(3):
            p.remember_fact(f"Fresh thought {i}: call mom.")
        old_event = p.remember(
            "event", "Lisbon trip with the cousins.", created_at=datetime.now(timezone.utc) - timedelta(days=200)
        )
        pages.append(p.page("xylophone"))  # shares no word and no meaning with anything stored

    assert pages[0].snippets[0].uri == long and pages[0].snippets[0].truncated
    cuts = [c for page in pages for c in page.report.cuts]
    by_reason: dict[str, list[Cut]] = {}
    for cut in cuts:
        by_reason.setdefault(cut.reason, []).append(cut)
    assert set(by_reason) == {"budget", "top_k", "pinned", "dedup", "superseded", "decay", "below_threshold", "missing"}
    details = {(c.uri, c.reason): c.detail for c in cuts}
    assert all(
        re.fullmatch(r"needs \d+ tokens, \d+ left|section full: \d+ of 140 tokens used", c.detail)
        for c in by_reason["budget"]
    )
    assert all(c.detail in ("already 3 snippets", "ranked below the 3 snippets taken") for c in by_reason["top_k"])
    assert details[(profile, "pinned")] == details[(goal, "pinned")] == "already in the pinned block"
    assert {c.uri for c in by_reason["dedup"]} == {pattern}
    assert details[(pattern, "dedup")] == "already shown in the procedures section"
    assert pattern in {x.uri for x in pages[0].patterns}  # it is on the page, once
    assert details[(old_goal, "superseded")] == f"superseded by {goal}"
    assert details[(expired, "superseded")] == "expired"
    assert details[("label:999999", "missing")] == "index hit not in store"
    assert tips <= {c.uri for c in by_reason["below_threshold"]}
    assert all(c.detail == "no lane scored it above its floor" for c in by_reason["below_threshold"])
    (decayed,) = by_reason["decay"]
    assert decayed.uri == old_event and set(decayed.lanes) == {"salience"}
    assert re.fullmatch(
        r"(already 3 snippets|ranked below the 3 snippets taken); "
        r"recency ×0\.01 \(age 200 d, half-life 30 d\)",
        decayed.detail,
    )
    for page in pages:
        table = page.report.table()
        assert all(c.uri in table and c.reason in table for c in page.report.cuts)
        assert all(c.lanes for c in page.report.cuts)  # every cut says which lanes had found it


def test_report_breaks_the_salience_score_into_its_terms(store_path: Path) -> None:
    frozen = datetime(2026, 6, 1, tzinfo=timezone.utc)
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        p.clock = lambda: frozen
        p.remember_fact("Deploy keys live in the vault.")
        assert p.sync(timeout=60)
        p.workers.stop()
        fresh = p.remember_fact("Reminder: water the plants.", importance=0.8, created_at=frozen - timedelta(days=90))
        page = p.page("anything new?")
        (entry,) = [s for s in page.report.snippets if s.uri == fresh]
        assert entry.salience is not None and entry.lanes.keys() == {"salience"}
        weights = p.config.salience_weights
        half_life = p.config.half_life_days["fact"]
        assert entry.salience["recency"] == pytest.approx(weights["recency"] * 0.5 ** (90 / half_life), abs=1e-5)
        assert entry.salience["importance"] == pytest.approx(weights["importance"] * 0.8, abs=1e-5)
        assert entry.salience["access"] == 0.0
        parts = sum(entry.salience[k] for k in ("recency", "importance", "strength", "access"))
        assert entry.salience["total"] == pytest.approx(parts, abs=1e-5)
        # the terms add up to the score the salience lane ranked it by
        assert entry.salience["total"] == pytest.approx(entry.lanes["salience"]["score"], abs=1e-5)
        assert all(s.salience is None for s in page.report.snippets if "salience" not in s.lanes)
        assert page.report.to_dict()["snippets"][0]["salience"] == page.report.snippets[0].salience
        assert (
            f"salience {entry.salience['total']:.3f} = recency {entry.salience['recency']:.3f}" in page.report.table()
        )


def test_a_memory_without_a_vector_is_not_outranked_for_lacking_one() -> None:
    from mempager.lanes.fusion import UNEMBEDDED

    weights = {"semantic": 0.5, "lexical": 0.5, "salience": 0.2}
    lanes = {"semantic": [(1, 0.9)], "lexical": [(2, 10.0), (1, 6.0)]}
    # 2 matches the query exactly but has no vector yet; 1 is embedded and a near match
    unknown = fuse_scores(lanes, {"lexical": {}, UNEMBEDDED: {2: 0.0}}, weights, 0.1)
    assert [f.label for f in unknown] == [2, 1]
    assert unknown[0].score == pytest.approx(1.0)  # its semantic share taken from its lexical score
    # the same memory *with* a vector that scored nothing keeps its poor semantic score
    known = fuse_scores(lanes, {"semantic": {2: 0.05}}, weights, 0.1)
    assert [f.label for f in known] == [1, 2] and known[1].score == pytest.approx(0.5)
    # with the semantic lane down for the query, nobody has a semantic score: nothing is imputed
    down = fuse_scores({"lexical": lanes["lexical"]}, {UNEMBEDDED: {1: 0.0, 2: 0.0}}, weights, 0.1)
    assert [round(f.score, 3) for f in down] == [0.5, 0.3]


def test_tag_and_metadata_filters_on_retrieve_page_and_recall(tmp_path: Path) -> None:
    cfg = PagerConfig(embedder="hash")
    with mempager.open(tmp_path / "f.duckdb", actor="neo", config=cfg) as p:
        atlas = p.remember_fact("the deploy key for atlas is in vault", tags=["deploy"], metadata={"project": "atlas"})
        p.remember_fact("the deploy key for zephyr is in vault", tags=["deploy"], metadata={"project": "zephyr"})
        p.remember_fact("the deploy key for hermes is in vault", metadata={"project": "atlas", "tier": 2})
        p.remember_many([{"type": "event", "text": f"deploy key rotation note {i}"} for i in range(200)])
        assert p.sync(timeout=60)
        everything = {s.uri for s in p.retrieve("deploy key vault", k=50)}
        assert atlas in everything and len(everything) > 3
        only = p.retrieve("deploy key vault", tags=["deploy"], metadata={"project": "atlas"})
        assert [s.uri for s in only] == [atlas]
        tagged = {s.uri for s in p.retrieve("deploy key vault", tags=["deploy"])}
        assert len(tagged) == 2 and atlas in tagged
        by_project = p.retrieve("deploy key vault", metadata={"project": "atlas"})
        assert len(by_project) == 2 and all("zephyr" not in s.text for s in by_project)
        page = p.page("deploy key", goal="ship", metadata={"project": "zephyr"})
        assert [s.text for s in page.snippets] == ["the deploy key for zephyr is in vault"]
        assert [m.uri for m in p.recall("vault", metadata={"project": "atlas", "tier": 2})] != []
        assert len(p.recall(metadata={"project": "atlas"})) == 2 and len(p.recall(tags=["deploy"])) == 2
        assert p.recall(metadata={"project": "nowhere"}) == []
        with pytest.raises(mempager.InvalidInput, match="tags must be a list"):
            p.retrieve("x", tags="deploy")  # type: ignore[arg-type]
