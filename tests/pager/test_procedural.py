"""Procedural memory: thresholds, decay, asymmetric feedback, maturity, inversions, gate, ranking."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import mempager
from mempager import InvalidInput, MemoryNotFound, PagerConfig, PatternSpec
from mempager.procedural.lifecycle import decay, next_maturity
from mempager.procedural.procedures import LabelResolved

CFG = PagerConfig()
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def spec(name: str, trigger: str = "deploy the billing service") -> PatternSpec:
    return PatternSpec(name=name, trigger=trigger, steps=[f"{name} step one", f"{name} step two"])


@pytest.fixture
def p(store_path: Path):  # type: ignore[no-untyped-def]
    pg = mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash"))
    pg.clock = lambda: T0
    yield pg
    pg.close()


def test_decay_at_0_90_180_days() -> None:
    assert decay(0.8, T0, T0, 90) == pytest.approx(0.8)
    assert decay(0.8, T0, T0 + timedelta(days=90), 90) == pytest.approx(0.4)
    assert decay(0.8, T0, T0 + timedelta(days=180), 90) == pytest.approx(0.2)
    assert decay(0.8, T0 + timedelta(days=5), T0, 90) == pytest.approx(0.8)  # future: no growth


def test_decay_is_applied_at_read_and_not_stored(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        p.reinforce_pattern(spec("ship"))
    (pat,) = p.patterns()
    assert pat.decayed_confidence == pytest.approx(pat.confidence)
    p.clock = lambda: T0 + timedelta(days=90)
    (later,) = p.patterns()
    assert later.confidence == pytest.approx(pat.confidence)
    assert later.decayed_confidence == pytest.approx(pat.confidence / 2)
    p.clock = lambda: T0 + timedelta(days=180)
    assert p.patterns()[0].decayed_confidence == pytest.approx(pat.confidence / 4)


@pytest.mark.parametrize(
    ("maturity", "confidence", "apps", "expected"),
    [
        ("nascent", 0.49, 3, "nascent"),
        ("nascent", 0.5, 2, "nascent"),
        ("nascent", 0.5, 3, "established"),
        ("nascent", 0.95, 20, "established"),  # one level at a time
        ("established", 0.8, 10, "established"),
        ("established", 0.81, 9, "established"),
        ("established", 0.81, 10, "proven"),
        ("proven", 0.5, 1, "proven"),
        ("proven", 0.49, 50, "established"),
        ("established", 0.3, 0, "established"),
        ("established", 0.29, 50, "nascent"),
    ],
)
def test_maturity_thresholds(maturity: str, confidence: float, apps: int, expected: str) -> None:
    assert next_maturity(maturity, confidence, apps, CFG) == expected


def test_injection_gate_and_feedback_asymmetry(p) -> None:  # type: ignore[no-untyped-def]
    uri = p.reinforce_pattern(spec("ship"))
    p.reinforce_pattern(spec("ship"))
    assert p.procedural("deploy the billing service") == []  # 2 successes < 3
    p.reinforce_pattern(spec("ship"))
    (pat,) = p.procedural("deploy the billing service")
    assert pat.uri == uri and pat.successes == 3
    assert pat.confidence == pytest.approx(0.5 + 2 * 0.05)  # first write 0.5, then +0.05 twice
    page = p.page("how", goal="deploy the billing service", turn="t1")
    assert "Pattern: ship" in page.render()
    before = p.patterns()[0].confidence
    assert p.feedback("t1", "failure") == 1
    after_fail = p.patterns()[0].confidence
    assert before - after_fail == pytest.approx(0.20)
    p.page("how", goal="deploy the billing service", turn="t2")
    p.feedback("t2", "success")
    assert p.patterns()[0].confidence - after_fail == pytest.approx(0.05)
    # 4x asymmetry: one failure undoes four successes
    assert CFG.failure_decrement == pytest.approx(4 * CFG.success_increment)


def test_feedback_is_idempotent_and_attributed_to_exactly_the_injected(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        p.reinforce_pattern(spec("ship"))
        p.reinforce_pattern(spec("water plants", trigger="water the garden plants"))
    page = p.page("how", goal="deploy the billing service", turn="turn-7")
    assert [x.label for x in page.patterns] == ["ship"]
    conf = {x.label: x.confidence for x in p.patterns()}
    assert p.feedback("turn-7", "success") == 1
    assert p.feedback("turn-7", "success") == 0  # same feedback again: no change
    after = {x.label: x.confidence for x in p.patterns()}
    assert after["ship"] == pytest.approx(conf["ship"] + 0.05)
    assert after["water plants"] == conf["water plants"]
    with pytest.raises(InvalidInput, match="already has feedback"):
        p.feedback("turn-7", "failure")
    assert p.feedback("unknown-turn", "success") == 0
    # record_outcome(turn=...) drives the same path
    p.page("how", goal="deploy the billing service", turn="turn-8")
    p.record_outcome("shipped 2.4", "success", turn="turn-8")
    assert p.patterns()[0].confidence == pytest.approx(after["ship"] + 0.05)


def test_feedback_credits_only_the_procedures_the_agent_followed(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        p.reinforce_pattern(spec("ship"))
        p.reinforce_pattern(spec("ship canary", trigger="deploy the billing service with a canary"))
    page = p.page("how", goal="deploy the billing service", turn="t1")
    assert {x.label for x in page.patterns} == {"ship", "ship canary"}
    conf = {x.label: x.confidence for x in p.patterns()}
    with pytest.raises(InvalidInput, match="did not inject"):  # refused before anything is recorded
        p.feedback("t1", "failure", used=["water plants"])
    assert p.feedback("t1", "failure", used=["SHIP"]) == 1  # labels match case-insensitively
    after = {x.label: x.confidence for x in p.patterns()}
    assert after["ship"] == pytest.approx(conf["ship"] - 0.20) and after["ship canary"] == conf["ship canary"]
    assert p.feedback("t1", "failure", used=["SHIP"]) == 0  # still once per turn
    canary = next(x for x in p.patterns() if x.label == "ship canary")
    p.page("how", goal="deploy the billing service", turn="t2")
    with pytest.raises(InvalidInput, match="pass turn="):
        p.record_outcome("shipped", "success", used=["ship"])
    n_outcomes = len(p.recall(types=["outcome"]))
    with pytest.raises(InvalidInput, match="did not inject"):  # a refused outcome writes nothing
        p.record_outcome("shipped", "success", turn="t2", used=["nope"])
    assert len(p.recall(types=["outcome"])) == n_outcomes
    p.record_outcome("shipped with a canary", "success", turn="t2", used=[canary.uri])
    final = {x.label: x.confidence for x in p.patterns()}
    assert final["ship canary"] == pytest.approx(conf["ship canary"] + 0.05) and final["ship"] == after["ship"]


def test_inversion_proposal_review_and_application(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        p.reinforce_pattern(spec("force push"))
    for i in range(7):
        p.page("how", goal="deploy the billing service", turn=f"f{i}")
        p.feedback(f"f{i}", "failure")
    (pat,) = p.patterns()
    assert pat.failures == 7 and pat.successes == 3 and pat.confidence == 0.0
    (item,) = p.review()  # proposed once, not once per failure
    assert item.kind == "inversion"
    assert item.payload["text"].startswith("AVOID: force push") and "7 failures vs 3 successes" in item.payload["text"]
    new_uri = p.decide(item.id, accept=True)
    assert new_uri is not None
    assert p.patterns() and all(x.anti_pattern for x in p.patterns())  # original deprecated
    original = p.get(pat.uri)
    assert original.metadata["status"] == "deprecated" and original.superseded_by == new_uri
    page = p.page("how", goal="deploy the billing service")
    assert "## Patterns to avoid" in page.render() and "AVOID: force push" in page.render()
    assert "Pattern: force push" not in page.render()
    with pytest.raises(InvalidInput):
        p.decide(item.id, accept=True)


def test_inversion_thresholds_exact(p) -> None:  # type: ignore[no-untyped-def]
    from mempager.procedural.lifecycle import inversion_due

    assert not inversion_due(0, 2, CFG) and inversion_due(0, 3, CFG)
    assert not inversion_due(2, 4, CFG)  # 4 is not > 2×2
    assert inversion_due(2, 5, CFG)


def test_sweep_promotes_demotes_and_flags_without_deleting(p) -> None:  # type: ignore[no-untyped-def]
    p.write_pattern(spec("a"), strength=0.85, coverage=10)  # proven on write
    p.write_pattern(spec("b"), strength=0.6, coverage=3)  # established
    counts = p.sweep()
    assert counts["promoted"] == 0
    p.clock = lambda: T0 + timedelta(days=120)  # decayed: a 0.85→0.34, b 0.6→0.24
    counts = p.sweep()
    assert counts == {"promoted": 0, "demoted": 2, "flagged_for_removal": 0, "inversions_proposed": 0}
    maturities = {x.label: x.maturity for x in p.patterns()}
    assert maturities == {"a": "established", "b": "nascent"}
    assert len(p.patterns()) == 2 and p.stats()["memories"] == 2  # nothing deleted
    assert {x.label: x.confidence for x in p.patterns()} == {"a": 0.85, "b": 0.6}  # base untouched


def test_thompson_sampling_is_seeded_and_explores(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(30):
        p.reinforce_pattern(spec("veteran"))
    for _ in range(3):
        p.reinforce_pattern(spec("rookie"))
    goal = "deploy the billing service"
    first = [x.label for x in p.procedural(goal, rank="thompson", seed=42)]
    assert first == [x.label for x in p.procedural(goal, rank="thompson", seed=42)]
    tops = {p.procedural(goal, rank="thompson", seed=s)[0].label for s in range(60)}
    assert tops == {"veteran", "rookie"}  # the new pattern is explored sometimes
    assert p.procedural(goal)[0].label == "veteran"  # confidence ranking is stable


def test_recall_pattern_tolerates_typos(p) -> None:  # type: ignore[no-untyped-def]
    p.reinforce_pattern(PatternSpec(name="csv_summary", trigger="summarise a csv", steps=["load", "describe"]))
    assert p.recall_pattern("csv_summary").spec.steps == ("load", "describe")
    with pytest.warns(LabelResolved, match="csv_summary"):
        got = p.recall_pattern("csv_sumary")
    assert got.label == "csv_summary" and got.note and "csv_sumary" in got.note
    with pytest.raises(MemoryNotFound, match="csv_summary"):
        p.recall_pattern("totally different")


def test_menu_lists_the_rest(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", max_patterns_in_page=1)
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        for name in ("ship fast", "ship safe"):
            for _ in range(3):
                p.reinforce_pattern(spec(name))
        rendered = p.page("how", goal="deploy the billing service").render()
        assert rendered.count("Pattern: ship") == 1
        assert "## Other procedures (recall one by label)" in rendered and "— deploy the billing service" in rendered


@pytest.mark.parametrize("mode", ["autopilot", "copilot", "off"])
def test_encoding_gate_modes(store_path: Path, mode: str) -> None:
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", memory_mode=mode)) as p:
        user = p.remember_fact("The user said: deploy on Fridays is fine.", source="user")
        assert user.startswith("mem://")  # the user is always trusted
        sure = p.remember_fact("Billing runs on Postgres 16.", source="llm", confidence=0.9)
        unsure = p.remember_fact("Maybe the user dislikes tabs?", source="llm", confidence=0.3)
        batch = p.remember_many(
            [{"type": "fact", "text": "Consolidated fact", "source": "consolidation", "confidence": 0.2}]
        )
        texts = {m.text for m in p.recall(limit=100)}
        if mode == "autopilot":
            assert sure.startswith("mem://") and unsure.startswith("mem://") and batch[0].startswith("mem://")
            assert p.review() == []
        elif mode == "copilot":
            assert sure.startswith("mem://") and unsure.startswith("review://") and batch[0].startswith("review://")
            assert "Maybe the user dislikes tabs?" not in texts
            items = p.review()
            assert [i.payload["text"] for i in items] == ["Maybe the user dislikes tabs?", "Consolidated fact"]
            accepted = p.decide(items[0].id, accept=True)
            assert accepted and p.get(accepted).text == "Maybe the user dislikes tabs?"
            assert p.decide(items[1].id, accept=False) is None
            assert p.review() == [] and len(p.review(status=None)) == 2
        else:
            assert sure.startswith("gate://") and unsure.startswith("gate://")
            assert texts == {"The user said: deploy on Fridays is fine."}
            assert p.retrieve("deploy Fridays")  # still reads
    if mode == "copilot":  # the review queue is durable
        with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", memory_mode=mode)) as p:
            assert len(p.review(status=None)) == 2


def test_learned_rules_share_the_lifecycle(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        uri = p.learn_rule("Always run the migration dry-run before deploying billing")
    (pat,) = p.patterns()
    assert pat.uri == uri and pat.successes == 3
    assert "Always run the migration dry-run" not in p.pinned()  # learned rules are not inviolable


def test_sweep_promotes_one_level_at_its_exact_thresholds(p) -> None:  # type: ignore[no-untyped-def]
    """A pattern whose state outgrew its maturity (here: confidence set by hand) is promoted by sweep."""
    a = p.write_pattern(spec("a"), strength=0.6, coverage=10)
    b = p.write_pattern(spec("b"), strength=0.4, coverage=3)
    c = p.write_pattern(spec("c"), strength=0.4, coverage=20)
    assert {x.label: x.maturity for x in p.patterns()} == {"a": "established", "b": "nascent", "c": "nascent"}
    p.update(a, confidence=0.8)  # proven needs > 0.8
    p.update(b, confidence=0.49)  # established needs >= 0.5
    assert p.sweep()["promoted"] == 0
    p.update(a, confidence=0.81)
    p.update(b, confidence=0.5)
    p.update(c, confidence=0.95)
    assert p.sweep() == {"promoted": 3, "demoted": 0, "flagged_for_removal": 0, "inversions_proposed": 0}
    assert {x.label: x.maturity for x in p.patterns()} == {"a": "proven", "b": "established", "c": "established"}
    assert p.sweep()["promoted"] == 1  # c: one level per sweep
    assert p.patterns()[2].maturity == "proven" and p.sweep()["promoted"] == 0


def test_sweep_flags_removal_at_its_exact_threshold_and_keeps_the_pattern(p) -> None:  # type: ignore[no-untyped-def]
    uri = p.write_pattern(spec("flaky"), strength=0.5, coverage=3)
    for i in range(4):  # 4 failures > 3 successes, but not > 2 x 3: no inversion
        p.page("how", goal="deploy the billing service", turn=f"f{i}")
        p.feedback(f"f{i}", "failure")
    (pat,) = p.patterns()
    assert (pat.successes, pat.failures, pat.confidence) == (3, 4, 0.0)
    assert p.sweep() == {"promoted": 0, "demoted": 0, "flagged_for_removal": 1, "inversions_proposed": 0}
    assert p.get(uri).metadata["flagged"] == "removal" and p.review() == []
    p.update(uri, confidence=0.2)
    p.clock = lambda: T0 + timedelta(days=90)  # decayed exactly 0.1: not below it
    assert p.sweep()["flagged_for_removal"] == 0 and p.get(uri).metadata["flagged"] == "demotion"
    p.clock = lambda: T0 + timedelta(days=90, hours=1)
    assert p.sweep()["flagged_for_removal"] == 1 and p.get(uri).metadata["flagged"] == "removal"
    assert p.stats()["memories"] == 1 and p.get(uri).text == spec("flaky").encode()  # flagged, never deleted


def test_copilot_gate_at_its_exact_default_threshold(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", memory_mode="copilot")
    assert cfg.copilot_min_confidence == 0.7
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        assert p.remember_fact("kept at 0.7", source="llm", confidence=0.7).startswith("mem://")
        assert p.remember_fact("queued at 0.69", source="llm", confidence=0.69).startswith("review://")
        assert p.remember_fact("consolidated at 0.7", source="consolidation", confidence=0.7).startswith("mem://")
        assert [i.payload["text"] for i in p.review()] == ["queued at 0.69"]


def test_confidence_clamps_at_one_after_many_successes(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(30):
        p.reinforce_pattern(spec("ship"))
    for i in range(5):
        p.page("how", goal="deploy the billing service", turn=f"s{i}")
        assert p.feedback(f"s{i}", "success") == 1
    (pat,) = p.patterns()
    assert pat.confidence == 1.0 and pat.successes == 35 and pat.maturity == "proven"
    p.page("how", goal="deploy the billing service", turn="f")
    p.feedback("f", "failure")
    assert p.patterns()[0].confidence == pytest.approx(0.8)  # one failure from the clamp, not from 1.55


def test_lifecycle_stage_is_reported(p) -> None:  # type: ignore[no-untyped-def]
    def stages() -> dict[str, str]:
        return {x.label: x.stage for x in p.patterns(include_inactive=True)}

    for _ in range(3):
        p.reinforce_pattern(spec("bad"))
    for i in range(7):
        p.page("how", goal="deploy the billing service", turn=f"b{i}")
        p.feedback(f"b{i}", "failure")
    p.decide(p.review()[0].id, accept=True)
    assert stages() == {
        "bad": "inverted",
        "AVOID: bad — this pattern has caused repeated issues (7 failures vs 3 successes)": "anti-pattern",
    }
    p.reinforce_pattern(spec("new"))
    for _ in range(3):
        p.reinforce_pattern(spec("used"))
    p.write_pattern(spec("veteran"), strength=0.85, coverage=10)
    p.write_pattern(spec("stale"), strength=0.6, coverage=5)
    got = stages()
    assert [got[k] for k in ("new", "used", "veteran", "stale")] == ["candidate", "reinforced", "proven", "reinforced"]
    stale = p.recall_pattern("stale")
    p.update(stale.uri, metadata={**stale.memory.metadata, "last_applied_at": (T0 - timedelta(days=90)).isoformat()})
    assert stages()["stale"] == "reinforced"  # 0.6 decayed to 0.3 is not below 0.3 ...
    p.clock = lambda: T0 + timedelta(hours=1)
    assert stages()["stale"] == "decayed"  # ... an hour later it is
    assert p.stats()["patterns_by_stage"] == {
        "candidate": 1,
        "reinforced": 1,
        "proven": 1,
        "decayed": 1,
        "inverted": 1,
        "anti-pattern": 1,
    }


def test_accepting_a_queued_memory_keeps_every_field_and_happens_once(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", memory_mode="copilot")
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        held = p.remember(
            "event",
            "Flew to Lisbon",
            source="llm",
            confidence=0.3,
            importance=0.9,
            strength=0.7,
            created_at="2023-05-08T13:56:00",
            tags=["trip"],
            metadata={"seat": "12A"},
        )
        (item,) = p.review()
        assert held.endswith(item.id)
        uri = p.decide(item.id, accept=True)
        assert uri is not None
        m = p.get(uri)
        assert (m.text, m.source.value, m.confidence, m.importance, m.strength, m.tags, m.metadata) == (
            "Flew to Lisbon",
            "llm",
            0.3,
            0.9,
            0.7,
            ("trip",),
            {"seat": "12A"},
        )
        assert m.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
        with pytest.raises(InvalidInput, match="already accepted"):
            p.decide(item.id, accept=True)
        assert p.stats()["memories"] == 1
        closed = p.review(status=None)[0]
        assert (closed.status, closed.result_uri) == ("accepted", uri) and "text" not in closed.payload


def test_forgetting_a_pattern_withdraws_its_inversion_proposal(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        uri = p.reinforce_pattern(spec("force push"))
    for i in range(7):
        p.page("how", goal="deploy the billing service", turn=f"f{i}")
        p.feedback(f"f{i}", "failure")
    (item,) = p.review()
    assert p.forget(uri) == 1
    assert p.review(status=None) == []
    with pytest.raises(MemoryNotFound):
        p.decide(item.id, accept=True)


def test_forgetting_a_pattern_forgets_its_inversion(p) -> None:  # type: ignore[no-untyped-def]
    """The anti-pattern copies the pattern's label, trigger and steps: it goes with it (not vice versa)."""

    def invert(name: str, trigger: str) -> tuple[str, str]:
        for _ in range(3):
            uri = p.reinforce_pattern(spec(name, trigger=trigger))
        for i in range(7):
            assert [x.label for x in p.page("how", goal=trigger, turn=f"{name}{i}").patterns] == [name]
            p.feedback(f"{name}{i}", "failure")
        avoid = p.decide(p.review()[0].id, accept=True)
        assert avoid is not None and p.get(avoid).metadata["inverted_from"] == uri
        return uri, avoid

    first, first_avoid = invert("force push", "publish the release branch")
    assert p.forget(first_avoid) == 1 and p.get(first).metadata["status"] == "deprecated"
    second, second_avoid = invert("skip the tests", "rotate the signing keys")
    p.reinforce_pattern(spec("water plants", trigger="water the garden plants"))
    assert p.forget(second) == 2
    with pytest.raises(MemoryNotFound):
        p.get(second_avoid)
    assert sorted(x.label for x in p.patterns(include_inactive=True)) == ["force push", "water plants"]
