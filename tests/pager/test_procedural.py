"""Procedural memory: thresholds, decay, asymmetric feedback, maturity, inversions, gate, ranking."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import pager
from pager import InvalidInput, MemoryNotFound, PagerConfig, PatternSpec
from pager.lifecycle import decay, next_maturity
from pager.procedural import LabelResolved

CFG = PagerConfig()
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def spec(name: str, trigger: str = "deploy the billing service") -> PatternSpec:
    return PatternSpec(name=name, trigger=trigger, steps=[f"{name} step one", f"{name} step two"])


@pytest.fixture
def p(store_path: Path):  # type: ignore[no-untyped-def]
    pg = pager.open(store_path, actor="neo", config=PagerConfig(embedder="hash"))
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
        ("nascent", 0.49, 3, "nascent"), ("nascent", 0.5, 2, "nascent"), ("nascent", 0.5, 3, "established"),
        ("nascent", 0.95, 20, "established"),  # one level at a time
        ("established", 0.8, 10, "established"), ("established", 0.81, 9, "established"),
        ("established", 0.81, 10, "proven"), ("proven", 0.5, 1, "proven"), ("proven", 0.49, 50, "established"),
        ("established", 0.3, 0, "established"), ("established", 0.29, 50, "nascent"),
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
    page = p.page("deploy the billing service", "how", turn="t1")
    assert "Pattern: ship" in page.render()
    before = p.patterns()[0].confidence
    assert p.feedback("t1", "failure") == 1
    after_fail = p.patterns()[0].confidence
    assert before - after_fail == pytest.approx(0.20)
    p.page("deploy the billing service", "how", turn="t2")
    p.feedback("t2", "success")
    assert p.patterns()[0].confidence - after_fail == pytest.approx(0.05)
    # 4x asymmetry: one failure undoes four successes
    assert CFG.failure_decrement == pytest.approx(4 * CFG.success_increment)


def test_feedback_is_idempotent_and_attributed_to_exactly_the_injected(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        p.reinforce_pattern(spec("ship"))
        p.reinforce_pattern(spec("water plants", trigger="water the garden plants"))
    page = p.page("deploy the billing service", "how", turn="turn-7")
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
    p.page("deploy the billing service", "how", turn="turn-8")
    p.record_outcome("shipped 2.4", "success", turn="turn-8")
    assert p.patterns()[0].confidence == pytest.approx(after["ship"] + 0.05)


def test_inversion_proposal_review_and_application(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        p.reinforce_pattern(spec("force push"))
    for i in range(7):
        p.page("deploy the billing service", "how", turn=f"f{i}")
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
    page = p.page("deploy the billing service", "how")
    assert "## Patterns to avoid" in page.render() and "AVOID: force push" in page.render()
    assert "Pattern: force push" not in page.render()
    with pytest.raises(InvalidInput):
        p.decide(item.id, accept=True)


def test_inversion_thresholds_exact(p) -> None:  # type: ignore[no-untyped-def]
    from pager.lifecycle import inversion_due

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
    with pager.open(store_path, actor="neo", config=cfg) as p:
        for name in ("ship fast", "ship safe"):
            for _ in range(3):
                p.reinforce_pattern(spec(name))
        rendered = p.page("deploy the billing service", "how").render()
        assert rendered.count("Pattern: ship") == 1
        assert "## Other procedures (recall one by label)" in rendered and "— deploy the billing service" in rendered


@pytest.mark.parametrize("mode", ["autopilot", "copilot", "off"])
def test_encoding_gate_modes(store_path: Path, mode: str) -> None:
    with pager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", memory_mode=mode)) as p:
        user = p.remember_fact("The user said: deploy on Fridays is fine.", source="user")
        assert user.startswith("mem://")  # the user is always trusted
        sure = p.remember_fact("Billing runs on Postgres 16.", source="llm", confidence=0.9)
        unsure = p.remember_fact("Maybe the user dislikes tabs?", source="llm", confidence=0.3)
        batch = p.remember_many([{"type": "fact", "text": "Consolidated fact", "source": "consolidation",
                                  "confidence": 0.2}])
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
        with pager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", memory_mode=mode)) as p:
            assert len(p.review(status=None)) == 2


def test_learned_rules_share_the_lifecycle(p) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        uri = p.learn_rule("Always run the migration dry-run before deploying billing")
    (pat,) = p.patterns()
    assert pat.uri == uri and pat.successes == 3
    assert "Always run the migration dry-run" not in p.pinned()  # learned rules are not inviolable
