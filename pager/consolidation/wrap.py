"""The session wrap: ``prepare_wrap`` freezes what happened, ``save_continuity`` validates and saves.

    wrap = p.prepare_wrap()                      # one open wrap per actor; a repeat hands it back
    if wrap.status == "ready":
        result = p.save_continuity(llm(wrap.package), affect=Affect("curious", 0.8))

The caller's LLM does the compression; this module owns the substrate: the frozen snapshot, the
section schema, the immune system (``validator``), the shrink gate, associations and the audit.
A refused save changes nothing and leaves the wrap open (an audit ``wrap.refused`` records it);
a second save needs a new ``prepare_wrap``. With a ``session_id`` the opt-in single-consolidator
gate applies: only the sole live session, or the holder of the consolidation baton, may save;
another is downgraded to capture-only (its episodes stay; the continuity is not touched).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from mempager.config import PagerConfig
from mempager.consolidation.associations import Affect, LinkReport, as_affect, update_links
from mempager.consolidation.package import build_package
from mempager.consolidation.report import Episode, PatternChange, SaveResult, Wrap
from mempager.consolidation.schema import DEFAULT_SCHEMA, PRESETS, Section, SectionSchema, split_sections
from mempager.consolidation.shrink_gate import check_shrink
from mempager.consolidation.validator import Rules, Validation, Verdict, stale, validate
from mempager.errors import ContinuityInvalid, InvalidInput, ShrinkRefused, WrapNotOpen
from mempager.protocols import ConsolidationState, ContinuityVersion, Store, WrapCommit, WrapRecord
from mempager.validate import check_text, content_hash

MAX_EPISODES = 2000  # per wrap; the rest wait for the next one
SESSION_LIVE = timedelta(minutes=30)  # a session not seen for this long no longer counts as live
CONTEXT_LINKS = 12  # association lines in a package


def wrap_uri(actor: str, number: int) -> str:
    return f"wrap:{actor}/{number}"


class Consolidator:
    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        clock: Callable[[], datetime],
        links_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.links_changed = links_changed  # the association lane's cache of the links
        self.cstore = store.consolidation
        self.actor = actor
        self.config = config
        self.clock = clock
        self.rules = Rules()

    # -- schema -------------------------------------------------------------------------------
    def schema(self, state: ConsolidationState | None = None) -> SectionSchema:
        state = state or self.cstore.state(self.actor)
        return DEFAULT_SCHEMA if state.schema is None else SectionSchema.from_json(state.schema)

    def set_section_schema(self, schema: SectionSchema | str) -> None:
        """A ``SectionSchema`` or a preset name ("default", "partnership"); refused while a wrap is open."""
        if isinstance(schema, str):
            if schema not in PRESETS:
                raise InvalidInput(f"unknown section schema preset {schema!r}; choose one of {', '.join(PRESETS)}")
            schema = PRESETS[schema]
        self.cstore.set_schema(self.actor, schema.to_json())

    # -- reads --------------------------------------------------------------------------------
    def continuity(self) -> str:
        """The current continuity text ("" before the first save)."""
        found = self.cstore.continuity(self.actor, 1)
        return found[0].text if found else ""

    def versions(self, limit: int = 20) -> list[ContinuityVersion]:
        return self.cstore.continuity(self.actor, limit)

    def wraps(self, limit: int = 20) -> list[WrapRecord]:
        return self.cstore.wraps(self.actor, limit)

    # -- prepare ------------------------------------------------------------------------------
    def prepare_wrap(self, *, session_id: str | None = None) -> Wrap:
        if session_id is not None:
            self.cstore.session_seen(self.actor, check_text(session_id, 200, "session_id"), self.clock())
        state = self.cstore.state(self.actor)
        schema = self.schema(state)  # a corrupt stored schema fails here, before a wrap opens
        record = state.open or self.cstore.open_wrap(self.actor, session_id, MAX_EPISODES)
        if record is None:
            return Wrap("empty", 0, (), "", None)
        episodes = [e for _, e in self._snapshot(record)]
        history = {r.key: r for r in self.cstore.patterns(self.actor)}
        today = self.clock().date()
        proven = [r for r in history.values() if r.in_continuity and r.level >= 3]
        links = self.cstore.links(self.actor, list(record.labels))[:CONTEXT_LINKS]
        ends = sorted({x for k in links for x in (k.a, k.b)})
        ids = {label: m.id for label, m in self.store.get_many(self.actor, ends).items()}
        package = build_package(
            actor=self.actor,
            number=record.number,
            episodes=episodes,
            schema=schema,
            continuity=self.continuity() or None,
            stale=stale(history, today, self.rules),
            proven=proven,
            links=links,
            ids=ids,
        )
        return Wrap("ready", record.number, tuple(episodes), package, record.opened_at)

    def _snapshot(self, record: WrapRecord) -> list[tuple[int, Episode]]:
        """(label, episode) of the snapshot's memories that still exist (a forgotten one leaves the wrap too)."""
        found = self.store.get_many(self.actor, list(record.labels))
        return [
            (label, Episode(m.id, m.uri, m.type.value, m.text, m.created_at))
            for label, m in ((label, found[label]) for label in record.labels if label in found)
        ]

    # -- save ---------------------------------------------------------------------------------
    def take_baton(self, session_id: str) -> None:
        """Make ``session_id`` the one session allowed to consolidate while several are live."""
        self.cstore.take_baton(self.actor, check_text(session_id, 200, "session_id"))

    def save_continuity(
        self, text: str, *, affect: object = None, allow_shrink: object = False, session_id: str | None = None
    ) -> SaveResult:
        state = self.cstore.state(self.actor)
        record = state.open
        if record is None:
            raise WrapNotOpen(
                f"no open wrap for actor {self.actor!r}: call prepare_wrap() first (each save needs its own "
                "prepare_wrap; a wrap that reported demotions is the immune system working, not a reason to re-save)"
            )
        mood = as_affect(affect)  # a bad affect is refused before anything is recorded
        if session_id is not None and not self._may_consolidate(state, check_text(session_id, 200, "session_id")):
            uri = wrap_uri(self.actor, record.number)
            self.cstore.record_event(self.actor, "wrap.capture-only", uri, content_hash(session_id))
            return SaveResult(saved=False, wrap=record.number, version=None, capture_only=True)
        text = check_text(text, self.config.max_text_bytes, "continuity")
        schema = self.schema(state)
        snapshot = self._snapshot(record)
        history = {r.key: r for r in self.cstore.patterns(self.actor)}
        previous = self.continuity() or None
        try:
            checked = validate(
                text,
                schema,
                snapshot={e.id: e.text for _, e in snapshot},
                history=history,
                previous_text=previous,
                citations_seen=state.citations_seen,
                today=self.clock().date(),
                rules=self.rules,
            )
            check_shrink(_sections(previous, schema), checked.sections, schema, allow_shrink)
        except (ContinuityInvalid, ShrinkRefused):
            uri = wrap_uri(self.actor, record.number)
            self.cstore.record_event(self.actor, "wrap.refused", uri, content_hash(text))
            raise
        labels = {e.id: label for label, e in snapshot}
        groups = [[labels[i] for i in v.cited] for v in checked.verdicts if v.cited]
        cited = [labels[i] for v in checked.verdicts for i in v.cited]
        links, linked = update_links(self.cstore.links(self.actor), groups, cited, wrap=record.number, affect=mood)
        commit = WrapCommit(
            number=record.number,
            text=checked.text,
            patterns=checked.history,
            links=links,
            citations_seen=state.citations_seen or checked.cited_any,
            metrics=_metrics(checked, len(snapshot), linked, len(links), sum(k.strength for k in links)),
            audit=_audit(self.actor, record.number, checked, linked, mood),
        )
        version = self.cstore.commit_wrap(self.actor, commit)
        self.links_changed()
        return _result(record.number, version, checked, linked)

    def _may_consolidate(self, state: ConsolidationState, session_id: str) -> bool:
        now = self.clock()
        self.cstore.session_seen(self.actor, session_id, now)
        live = self.cstore.live_sessions(self.actor, now - SESSION_LIVE)
        return live == [session_id] or state.baton == session_id


def _sections(text: str | None, schema: SectionSchema) -> list[Section]:
    if not text:
        return []
    try:
        return split_sections(text, schema)
    except ContinuityInvalid:  # saved under another schema: nothing to compare sizes with
        return []


def _change(v: Verdict) -> PatternChange:
    return PatternChange(v.name, v.previous, v.level, v.outcome, v.reason)


def _result(number: int, version: int, checked: Validation, linked: LinkReport) -> SaveResult:
    by = {o: tuple(_change(v) for v in checked.verdicts if v.outcome in o) for o in ("graduated", "held", "kept")}
    return SaveResult(
        saved=True,
        wrap=number,
        version=version,
        graduated=by["graduated"],
        demoted=tuple(_change(v) for v in checked.verdicts if v.outcome in ("demoted", "capped")),
        held=by["held"],
        kept=by["kept"],
        gaming_suspects=checked.gaming_suspects,
        omitted_patterns=checked.omitted,
        missing_stance=checked.missing_stance,
        frozen_restored=checked.frozen_restored,
        linked=linked,
    )


def _metrics(checked: Validation, episodes: int, linked: LinkReport, links: int, strength: float) -> dict[str, object]:
    levels = [v.level for v in checked.verdicts]
    count = {o: sum(v.outcome == o for v in checked.verdicts) for o in ("graduated", "demoted", "capped", "held")}
    return {
        "episodes": episodes,
        "patterns_1x": levels.count(1),
        "patterns_2x": levels.count(2),
        "patterns_3x": levels.count(3),
        **count,
        "gaming_suspects": len(checked.gaming_suspects),
        "omitted_patterns": len(checked.omitted),
        "links": links,
        "link_strength": round(strength, 4),
        "links_created": linked.created,
        "continuity_chars": len(checked.text),
    }


def _audit(
    actor: str, number: int, checked: Validation, linked: LinkReport, affect: Affect | None
) -> tuple[tuple[str, str, str], ...]:
    """Audit entries of a save besides ``wrap.save``: one per pattern verdict and per flag (hashes only)."""
    uri = wrap_uri(actor, number)
    rows: list[tuple[str, str, str]] = [
        (f"pattern.{v.outcome}", f"{uri}#pattern:{content_hash(v.key)[:16]}", content_hash(f"{v.key}|{v.level}"))
        for v in checked.verdicts
    ]
    rows += [("wrap.gaming", f"{uri}#id:{i}", content_hash(i)) for i in checked.gaming_suspects]
    rows += [("wrap.omitted", uri, content_hash(name)) for name in checked.omitted]
    rows += [("wrap.no-stance", uri, content_hash(name)) for name in checked.missing_stance]
    summary = f"{linked.as_dict()}|{affect.tag if affect else ''}|{affect.intensity if affect else ''}"
    rows.append(("associations", uri, content_hash(summary)))
    return tuple(rows)
