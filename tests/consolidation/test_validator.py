"""The immune system as a pure function: levels, evidence, demotion, carry-forward, flags.

Hypothesis properties cover what must hold for any input (a fabricated or out-of-snapshot id
never raises a level; the gaming flag at exactly three; a level rises at most one step)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mempager.consolidation.lines import meaningful_words, overlap, parse_line
from mempager.consolidation.schema import DEFAULT_SCHEMA, PARTNERSHIP_SCHEMA, SectionSchema, SectionSpec
from mempager.consolidation.validator import Rules, stale, validate
from mempager.errors import ConsolidationError, ContinuityInvalid
from mempager.protocols import PatternRecord

TODAY = date(2026, 5, 20)
SNAP = {
    "e1": "The deploy failed on Friday because the migration locked the users table.",
    "e2": "Friday deploy failed again: the migration locked users for minutes.",
    "e3": "Coffee machine on floor three is broken.",
}


def doc(*pattern_lines: str, state: str = "Busy.") -> str:
    body = "\n".join(pattern_lines)
    return f"# Continuity\n## State\n{state}\n## Patterns\n{body}\n## Decisions\nNone.\n## Context\nSmall team.\n"


def run(text: str, history: dict[str, PatternRecord] | None = None, seen: bool = True, previous: str | None = None):  # type: ignore[no-untyped-def]
    return validate(
        text,
        DEFAULT_SCHEMA,
        snapshot=SNAP,
        history=history or {},
        previous_text=previous,
        citations_seen=seen,
        today=TODAY,
    )


def rec(
    level: int, max_level: int | None = None, grounded: date | None = TODAY, why: tuple[str, ...] = ()
) -> PatternRecord:
    return PatternRecord("friday deploys fail", "Friday deploys fail", level, max_level or level, grounded, why, True)


GOOD = '[evidence: e1 "deploy failed friday migration"] [evidence: e2 "friday deploy migration locked"]'


def test_grounded_graduation_rises_one_level_and_is_dated_today() -> None:
    out = run(doc(f"- Friday deploys fail | 2x (2026-01-01) {GOOD}"))
    (v,) = out.verdicts
    assert (v.previous, v.level, v.outcome, v.cited) == (0, 2, "graduated", ("e1", "e2"))
    assert "| 2x (2026-05-20) [evidence: e1" in out.text
    assert out.history[0].grounded_on == TODAY and out.history[0].max_level == 2


def test_a_claim_two_levels_up_is_capped() -> None:
    (v,) = run(doc(f"- Friday deploys fail | 3x (2026-01-01) {GOOD}")).verdicts
    assert (v.level, v.outcome) == (2, "capped") and "one step" in v.reason


@pytest.mark.parametrize(
    "tag, why",
    [
        ('[evidence: zz9 "deploy failed friday migration"]', "not one of this wrap's episodes"),
        ('[evidence: e3 "deploy failed friday migration"]', "shares 0 meaningful words"),
        ('[evidence: e1 "the deploy"]', "shares 1 meaningful words"),
    ],
)
def test_failing_evidence_demotes_and_is_marked_ungrounded(tag: str, why: str) -> None:
    out = run(doc(f"- Friday deploys fail | 3x (2026-01-01) {tag}"), {"friday deploys fail": rec(3, grounded=None)})
    (v,) = out.verdicts
    assert (v.level, v.outcome) == (2, "demoted") and why in v.reason
    assert "| 2x (2026-01-01) (ungrounded)" in out.text and "evidence" not in out.text.split("## Decisions")[0]


def test_bare_graduation_is_exempt_until_a_wrap_has_seen_citations() -> None:
    line = "- Friday deploys fail | 2x (2026-01-01)"
    assert run(doc(line), seen=False).verdicts[0].level == 2
    out = run(doc(line), seen=True)
    assert (out.verdicts[0].level, out.verdicts[0].outcome) == (1, "demoted")
    assert "(needs-evidence)" in out.text


def test_carry_forward_holds_a_recent_pattern_within_its_high_water() -> None:
    recent = {"friday deploys fail": rec(3, grounded=TODAY - timedelta(days=7))}
    out = run(doc('- Friday deploys fail | 3x (2026-05-01) [evidence: zz9 "made up words here"]'), recent)
    assert (out.verdicts[0].level, out.verdicts[0].outcome) == (3, "held")
    assert "| 3x (2026-05-01) (carried-forward)" in out.text and "zz9" not in out.text
    cold = {"friday deploys fail": rec(3, grounded=TODAY - timedelta(days=8))}
    assert run(doc("- Friday deploys fail | 3x (2026-05-01)"), cold).verdicts[0].level == 2
    above = {"friday deploys fail": rec(2, max_level=2, grounded=TODAY)}
    assert run(doc("- Friday deploys fail | 3x (2026-05-01)"), above).verdicts[0].outcome == "demoted"


def test_a_rephrased_regrounding_demotes_and_links_nothing() -> None:
    history = {"friday deploys fail": rec(2, why=("friday deploy failed migration locked",))}
    out = run(doc('- Friday deploys fail | 2x (2026-01-01) [evidence: e2 "friday deploy migration locked"]'), history)
    (v,) = out.verdicts
    assert (v.level, v.outcome, v.cited) == (1, "demoted", ()) and "rephrases" in v.reason


def test_gaming_flag_omitted_and_missing_stance() -> None:
    lines = [f'- P{i} deploys | 1x (2026-01-01) [evidence: e1 "deploy failed friday"]' for i in range(3)]
    assert run(doc(*lines)).gaming_suspects == ("e1",)
    assert run(doc(*lines[:2])).gaming_suspects == ()
    previous = doc("- Old wisdom holds | 3x (2026-01-01)")
    assert run(doc("- Something else | 1x (2026-01-01)"), previous=previous).omitted == ("Old wisdom holds",)
    history = {"friday deploys fail": rec(2)}
    new3 = run(doc(f"- Friday deploys fail | 3x (2026-01-01) {GOOD}"), history)
    assert new3.verdicts[0].level == 3 and new3.missing_stance == ("Friday deploys fail",)
    stance = run(doc(f"- Friday deploys fail | 3x (2026-01-01) {GOOD} [no-contradicts]"), history)
    assert stance.missing_stance == () and "[no-contradicts]" in stance.text


def test_missing_or_extra_sections_are_refused_with_what_to_do() -> None:
    with pytest.raises(ContinuityInvalid, match="missing '## Decisions'.*nothing was saved"):
        run("## State\nx\n## Patterns\n## Context\ny\n")
    with pytest.raises(ContinuityInvalid, match="not in the schema '## Secrets'"):
        run(doc() + "## Secrets\nx\n")
    with pytest.raises(ContinuityInvalid, match="order"):
        run("## Patterns\n## State\n## Decisions\n## Context\n")


def test_frozen_sections_keep_their_previous_text() -> None:
    schema = SectionSchema((*DEFAULT_SCHEMA.sections, SectionSpec("Charter", "frozen")))
    before = doc() + "## Charter\nWe ship small.\n"
    after = doc() + "## Charter\nWe ship whatever.\n"
    out = validate(after, schema, snapshot=SNAP, history={}, previous_text=before, citations_seen=True, today=TODAY)
    assert out.frozen_restored == ("Charter",) and "We ship small." in out.text and "whatever" not in out.text


def test_schema_presets_and_a_corrupt_stored_schema_fail_closed() -> None:
    assert PARTNERSHIP_SCHEMA.gated and not DEFAULT_SCHEMA.gated
    assert SectionSchema.from_json(PARTNERSHIP_SCHEMA.to_json()) == PARTNERSHIP_SCHEMA
    with pytest.raises(ConsolidationError, match="fails closed"):
        SectionSchema.from_json('[{"heading": "State", "role": "bogus"}]')
    with pytest.raises(ContinuityInvalid):
        SectionSchema((SectionSpec("State", "live-state"),))  # no graduating section


def test_stale_lists_graduated_patterns_not_regrounded_for_seven_days() -> None:
    old = rec(2, grounded=TODAY - timedelta(days=8))
    fresh = PatternRecord("b", "B", 2, 2, TODAY - timedelta(days=7), (), True)
    low = PatternRecord("c", "C", 1, 1, None, (), True)
    assert stale({"a": old, "b": fresh, "c": low}, TODAY) == [old]


def test_meaningful_words_skip_short_words_and_stopwords() -> None:
    assert meaningful_words("The deploy is on a Friday, as it was") == {"deploy", "friday"}
    assert overlap("deploy Friday", "friday DEPLOY!") == 2
    parsed = parse_line('* Deploys fail | 4x (2026-01-02) [evidence: a1 "x y"] (ungrounded) [contradicts: Old]')
    assert parsed is not None and parsed.level == 4 and parsed.contradicts == ("Old",) and parsed.extra == ""
    assert parse_line("just prose | with a bar") is None


# -- properties -----------------------------------------------------------------------------------
ids = st.sampled_from(["e1", "e2", "e3", "zz9", "old1", "x"])
words = st.lists(
    st.sampled_from(["deploy", "friday", "migration", "locked", "users", "coffee", "the", "a"]), max_size=6
)
citations = st.lists(st.tuples(ids, words.map(" ".join)), max_size=4)
histories = st.one_of(
    st.none(),
    st.builds(
        lambda lvl, hi, days: rec(lvl, max(lvl, hi), None if days is None else TODAY - timedelta(days=days)),
        st.integers(1, 3),
        st.integers(1, 3),
        st.one_of(st.none(), st.integers(0, 30)),
    ),
)


def _line(level: int, cites: list[tuple[str, str]]) -> str:
    return f"- Friday deploys fail | {level}x (2026-01-01) " + " ".join(f'[evidence: {i} "{w}"]' for i, w in cites)


@given(st.integers(1, 5), citations, histories, st.booleans())
def test_property_no_valid_evidence_never_raises_a_level(level: int, cites, prev, seen) -> None:  # type: ignore[no-untyped-def]
    """A fabricated or out-of-snapshot id (or any failing citation) never lifts a level above its previous one."""
    fabricated = [(i, w) for i, w in cites if i not in SNAP]
    history = {"friday deploys fail": prev} if prev else {}
    (v,) = run(doc(_line(level, cites + [("zz9", "deploy friday migration")])), history, seen).verdicts
    base = prev.level if prev else 1
    assert v.level <= base and v.outcome != "graduated" and not v.grounded
    assert "zz9" not in v.cited and all(i not in v.cited for i, _ in fabricated)


@given(st.integers(1, 5), citations, histories, st.booleans())
def test_property_a_level_rises_at_most_one_step(level: int, cites, prev, seen) -> None:  # type: ignore[no-untyped-def]
    history = {"friday deploys fail": prev} if prev else {}
    (v,) = run(doc(_line(level, cites)), history, seen).verdicts
    assert 1 <= v.level <= 3 and v.level <= max(prev.level if prev else 1, 1) + 1
    assert set(v.cited) <= set(SNAP)


@given(st.integers(0, 6))
def test_property_gaming_flag_at_exactly_three(n: int) -> None:
    lines = [f'- P{i} | 1x (2026-01-01) [evidence: e1 "deploy friday"]' for i in range(n)]
    assert run(doc(*lines)).gaming_suspects == (("e1",) if n >= Rules().gaming_threshold else ())
    assert Rules().gaming_threshold == 3
