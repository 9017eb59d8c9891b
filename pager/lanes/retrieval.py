"""Page-fault retrieval: lanes (semantic, lexical, salience, time, prior, association), fusion, re-check, packing;
recall, get."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound, PagerError, StoreBusy, StoreUnavailable
from mempager.fence import render_line
from mempager.lanes.aside import Aside, inline
from mempager.lanes.association import AssociationLane
from mempager.lanes.candidates import Completions
from mempager.lanes.filters import ANYTHING, DEPTH_FACTOR, Where, where_of
from mempager.lanes.fusion import UNEMBEDDED, Cut, Fused, FusedOrder, Packer, Shown, fuse, fuse_order, is_current
from mempager.lanes.lines import line
from mempager.lanes.rows import hydrator
from mempager.lanes.salience import SalienceBreakdown, params_from_config, salience_score
from mempager.lanes.when import TimeLane
from mempager.protocols import LexicalLaneLike, SemanticLaneLike, Store
from mempager.types import Memory, MemoryType, Snippet, Source
from mempager.validate import check_text, check_type, make_uri, parse_since, parse_time, parse_uri

log = logging.getLogger("mempager")
LINE_COST_CACHE = 65_536  # memory versions whose rendered line cost is remembered


@dataclass(frozen=True)
class Searched:
    """The semantic lane's hits in one retrieval and what was unembedded around its search (both
    None: the search did not run)."""

    hits: list[tuple[int, float]] | None
    around: list[int] | None


def _settle(pending: Future[Searched]) -> None:
    """Wait out a helper's search whose retrieval failed: its own failure is logged, not lost."""
    wait([pending])
    failed = pending.exception()
    if failed is not None:
        log.error("the semantic search of a failed retrieval failed too: %r", failed)


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{name} must be a positive integer, got {value!r}")


class Retriever:
    """Reads for one actor: the page fault (``retrieve``), deliberate ``recall`` and ``get``.

    The evaluation kit drives the stages one by one (``rank`` → ``fuse`` → ``select``) to
    measure many budgets from one ranking.
    """

    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        *,
        clock: Callable[[], datetime],
        semantic: SemanticLaneLike,
        lexical: LexicalLaneLike,
    ) -> None:
        self.store = store
        self.actor = actor
        self.config = config
        self.clock = clock
        self.semantic = semantic
        self.lexical = lexical
        self.when = TimeLane(store, actor, after_days=config.time_after_days)
        self.associations = AssociationLane(store, actor)
        self._line_costs: dict[tuple[Any, ...], int] = {}
        self._floors: dict[Callable[[str], int], int] = {}  # token estimator -> the cheapest line's cost
        self._hydrate = hydrator(store, actor)
        self._completions = Completions(store, semantic, actor, lambda: self.config)
        self._aside = Aside()

    def retrieve(
        self, query: str, k: int | None = None, *, budget: int | None = None, where: Where = ANYTHING
    ) -> list[Snippet]:
        """Page fault: the few memories this turn needs, fused from every lane.

        ``k`` defaults to ``retrieval_top_k``, ``budget`` (tokens) to ``retrieval_budget_tokens``.
        Each snippet costs its rendered page line (provenance prefix included). ``where`` keeps
        only memories with those tags and metadata (``lanes.filters``).
        """
        if budget is not None:
            _check_positive("budget", budget)
        snippets, _, _ = self.retrieve_with_cuts(query, k, budget, exclude=frozenset(), explain=False, where=where)
        return snippets

    def get(self, uri: str) -> Memory:
        actor, mtype, memory_id = parse_uri(uri)
        memory = self.store.get(self.actor, memory_id) if actor == self.actor else None
        if memory is None or memory.type is not mtype:  # the whole uri must match, not just the id
            raise MemoryNotFound(f"no memory {uri} for actor {self.actor!r}")
        return memory

    def rank(self, query: str, depth: int) -> tuple[dict[str, list[tuple[int, float]]], dict[str, dict[int, float]]]:
        """Each lane's ranked (label, score) list, ``depth`` deep (lanes never gate each other),
        and each lane's score for the candidates the other lanes found.

        The query is embedded here, then the semantic lane searches in a helper thread (``lanes.aside``)
        while this one searches the lexical lane, which asks for the semantic hits only to score them,
        at its end (so it waits, under its lock, for an in-process search of a few ms at most).
        """
        lanes: dict[str, list[tuple[int, float]]] = {}
        completions: dict[str, dict[int, float]] = {}
        unindexed = self.config.salience_mode == "unindexed"
        vector = self._embed(query)  # here: a slow or failing embedder never waits under a lane's lock
        search = functools.partial(self._search, vector, depth)
        aside = vector is not None and bool(getattr(self.semantic, "searches_aside", False))  # a large index
        pending = self._aside.submit(search) if aside else inline(search)

        def also() -> list[int]:  # the lexical lane scores the other lanes' finds too, at its end
            return [label for label, _ in pending.result().hits or ()] + [label for label, _ in timed]

        try:
            windows = self.when.windows(query) if self.config.lane_weights.get("time", 0.0) > 0 else []
            timed = self.when.search(windows, depth) if windows else []
            lexical = self.lexical.search_scored(query, depth, also)
        except BaseException:
            _settle(pending)
            raise
        found = pending.result()
        if found.hits is not None:
            lanes["semantic"] = found.hits
        if timed:
            lanes["time"] = timed
        lanes["lexical"], completions["lexical"] = lexical
        # What the semantic lane cannot see, read around its search (search_snapshot), so no
        # memory falls between the semantic and salience lanes for this query.
        unembedded = set(found.around) if found.around is not None else set(self.semantic.unembedded_labels())
        params = params_from_config(self.config, self.clock())
        only = sorted(unembedded) if unindexed else None  # [] (nothing unembedded): no store call, below
        lanes["salience"] = (
            [] if only == [] else self.store.salience(self.actor, self.config.salience_types, params, depth, only)
        )
        # the semantic scores of the other lanes' finds and the prior: one store call (lanes.candidates)
        self._completions.fill(lanes, completions, vector, unembedded, params)
        if windows:  # the time lane scores every candidate created inside the query's dates
            in_time = {label for label, _ in timed}
            rest = {label for hits in lanes.values() for label, _ in hits if label not in in_time}
            completions["time"] = self.when.inside(windows, sorted(rest))
        if self.config.lane_weights.get("speaker", 0.0) > 0:  # index.speakers: who said each candidate
            # read only if a speaker is named; the prior ranks only what the content lanes found
            candidates = (label for name, hits in lanes.items() if name != "prior" for label, _ in hits)
            said = self.lexical.spoken_by(query, candidates)
            if said:
                lanes["speaker"] = [(label, 1.0) for label in said]  # in label order
        if self.config.lane_weights.get("association", 0.0) > 0:
            self._associate(lanes, completions, vector, unembedded, depth)
        return lanes, completions

    def _embed(self, query: str) -> Any:
        """The query's vector, or None: a failing embedder degrades retrieval (logged), it does not stop it."""
        try:
            return self.semantic.embed_query(query)
        except PagerError as exc:
            log.warning("semantic lane skipped for this query: %s", exc)
            return None

    def _search(self, vector: Any, depth: int) -> Searched:
        """The semantic lane's hits, with what was unembedded around the search (None and None
        without a vector, or when the search fails: logged, as a failing embedder).

        Not when the store itself is out of reach (no connection, or none free within the pool
        wait): every read after this one would wait again, so a retrieve would take one pool wait
        per read instead of failing after the first (pg/db.py: a call waits once)."""
        if vector is None:
            return Searched(None, None)
        try:
            hits, around = self.semantic.search_snapshot(vector, depth)
        except (StoreUnavailable, StoreBusy):
            raise
        except PagerError as exc:
            log.warning("semantic lane skipped for this query: %s", exc)
            return Searched(None, None)
        return Searched(hits, around)

    def close(self) -> None:
        """Stop the helper threads (``lanes.aside``); a retrieval after this runs in one thread."""
        self._aside.close()

    def _associate(
        self,
        lanes: dict[str, list[tuple[int, float]]],
        completions: dict[str, dict[int, float]],
        vector: Any,
        unembedded: set[int],
        depth: int,
    ) -> None:
        """The association lane: neighbours of the best candidates fused so far (its seeds), so it
        runs after the others. Neighbours no other lane found get their semantic score too (their
        lexical and time scores stay 0: those lanes were asked before the neighbours were known)."""
        if not self.associations.graph():  # no links (no wrap yet): no second fusion to pay for
            return
        first, n = self.fuse(lanes, completions), self.associations.seeds
        seeds = list(zip(first.labels()[:n], first.scores()[:n], strict=True))
        linked = self.associations.search(seeds, depth)
        if not linked:
            return
        lanes["association"] = linked
        if vector is not None:
            scored = completions.setdefault("semantic", {})
            seen = {label for label, _ in lanes.get("semantic", ())}
            new = sorted(label for label, _ in linked if label not in seen and label not in scored)
            scored.update(self.semantic.scores_for(vector, new))
            completions.setdefault(UNEMBEDDED, {}).update(dict.fromkeys(sorted(set(new) & unembedded), 0.0))

    def fuse(self, lanes: dict[str, list[tuple[int, float]]], completions: dict[str, dict[int, float]]) -> FusedOrder:
        """Every candidate, best first (a ``Sequence[Fused]`` whose records are built when read)."""
        if self.config.fusion == "rrf":
            return FusedOrder.of(fuse(lanes, self.config.lane_weights, self.config.rrf_k))
        return fuse_order(lanes, completions, self.config.lane_weights, self.config.semantic_floor)

    def depth(self, k: int, budget: int) -> int:
        """How deep each lane must look to fill ``k`` snippets or ``budget`` tokens."""
        return max(self.config.lane_depth, 2 * min(k, budget // 8))

    def retrieve_with_cuts(
        self,
        query: str,
        k: int | None,
        budget: int | None,
        exclude: frozenset[str],
        explain: bool = True,
        *,
        shown: frozenset[str] = frozenset(),
        where: Where = ANYTHING,
    ) -> tuple[list[Snippet], list[Cut], dict[str, int]]:
        """``exclude``: uris in the pinned block; ``shown``: uris another page section shows;
        ``where``: the tags and metadata a memory must have to be shown.

        A ``budget`` of 0 (a page whose other sections left no room) retrieves nothing but still
        names, in the cuts, what would have come in.
        """
        query = check_text(query, self.config.max_text_bytes, "query")
        k = self.config.retrieval_top_k if k is None else k
        budget = self.config.retrieval_budget_tokens if budget is None else budget
        _check_positive("k", k)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise InvalidInput(f"budget must be an integer >= 0, got {budget!r}")
        depth = self.depth(k, budget) * (DEPTH_FACTOR if where else 1)
        lanes, completions = self.rank(query, depth)
        fused = self.fuse(lanes, completions)
        if where:  # the filter is not a cut: what it drops was never asked for
            labels = fused.labels()
            held = self.store.get_many(self.actor, labels)
            keep = [i for i, label in enumerate(labels) if label in held and where.matches(held[label])]
            fused = fused.reordered(np.array(keep, dtype=np.int64))
        snippets, cuts = self.select(fused, k, budget, exclude, explain, shown=shown)
        return snippets, cuts, {name: len(hits) for name, hits in lanes.items()}

    def select(
        self,
        fused: Sequence[Fused],
        k: int,
        budget: int,
        exclude: frozenset[str],
        explain: bool = True,
        *,
        shown: frozenset[str] = frozenset(),
    ) -> tuple[list[Snippet], list[Cut]]:
        """Re-check every hit against the store, drop what must not be shown, pack the rest.

        The salience reserve holds the last places the section actually has: when the budget,
        not ``k``, decides how many snippets fit, the packing is redone with the reserve there.
        """
        ranked = FusedOrder.of(fused)
        order = self._reserve_for_unembedded(ranked, k)
        snippets, cuts = self._pack(order, k, budget, exclude, shown, explain)
        if len(snippets) < k:
            again = self._reserve_for_unembedded(ranked, max(len(snippets), 1))
            if again.labels() != order.labels():
                snippets, cuts = self._pack(again, k, budget, exclude, shown, explain)
        return snippets, cuts

    def _pack(
        self,
        fused: FusedOrder,
        k: int,
        budget: int,
        exclude: frozenset[str],
        shown: frozenset[str],
        explain: bool,
    ) -> tuple[list[Snippet], list[Cut]]:
        """Candidates are hydrated in chunks, in fused order, only until the section is full.

        Only the fused records of candidates packed or cut are built (``FusedOrder``); candidates
        come from the mirror's columns (``lanes.rows``) rather than as whole memories.
        """
        now = datetime.now(timezone.utc)
        packer = Packer(
            k, budget, self.config.token_estimator, cost=self._line_cost, floor=self._floor(), explain=explain
        )
        cuts: list[Cut] = []
        seen: dict[str, Shown] = {}
        labels, scores = fused.labels(), fused.scores()
        floored = self.config.fusion == "score"
        done, chunk = 0, k + 8
        while done < len(labels) and not packer.full:
            start = done
            part = labels[start : start + chunk]
            done += len(part)
            memories = self._hydrate(part)
            for i, label in enumerate(part, start):
                memory = memories.get(label)
                if memory is None:
                    cuts.append(Cut(f"label:{label}", "missing", "index hit not in store", fused[i].hits))
                elif memory.uri in exclude:
                    cuts.append(Cut(memory.uri, "pinned", "already in the pinned block", fused[i].hits))
                elif memory.uri in shown:
                    cuts.append(Cut(memory.uri, "dedup", "already shown in the procedures section", fused[i].hits))
                elif not is_current(memory, now):
                    why = f"superseded by {memory.superseded_by}" if memory.superseded_by else "expired"
                    cuts.append(Cut(memory.uri, "superseded", why, fused[i].hits))
                elif scores[i] <= 0 and floored:
                    cuts.append(Cut(memory.uri, "below_threshold", "no lane scored it above its floor", fused[i].hits))
                elif not explain and len(packer.snippets) >= k:
                    continue  # the packer would only note a top_k cut, and nobody asked for cuts
                else:
                    seen[memory.uri] = memory
                    packer.offer(memory, fused[i])
        clock = self.clock()
        cuts += [self._blame_decay(cut, seen.get(cut.uri), clock) for cut in packer.cuts]
        if explain and done < len(labels):  # naming what ranked too low only matters in a report
            cuts += self._name_rest(fused[done:], len(packer.snippets) >= k, k, f"{packer.used} of {budget}")
        return packer.snippets, cuts

    def _floor(self) -> int:
        """Tokens of the cheapest line there can be (shortest time, source, type and id; no text):
        once less room is left, no candidate can fit and the rest need not be hydrated."""
        estimate = self.config.token_estimator
        floor = self._floors.get(estimate)
        if floor is None:
            floor = self._floors[estimate] = estimate(
                render_line(
                    datetime.min,
                    min(Source, key=lambda s: len(s.value)).value,
                    make_uri(self.actor, min(MemoryType, key=lambda t: len(t.value)), "0" * 16),
                    "",
                )
                + "\n"
            )
        return floor

    def _name_rest(self, rest: FusedOrder, k_full: bool, k: int, used: str) -> list[Cut]:
        """Cuts for the candidates below a full section, named without hydrating most of them."""
        reason, detail = (
            ("top_k", f"ranked below the {k} snippets taken")
            if k_full
            else ("budget", f"section full: {used} tokens used")
        )
        labels, scores = rest.labels(), rest.scores()
        uris = self.store.uris(self.actor, labels)
        alone = rest.only_hit_by("salience").tolist()  # only these can be blamed on decay
        lonely = self.store.get_many(self.actor, [label for label, only in zip(labels, alone, strict=True) if only])
        floored = self.config.fusion == "score"
        clock, out = self.clock(), []
        for label, score, f, only in zip(labels, scores, rest.records(), alone, strict=True):
            uri = uris.get(label)
            if uri is None:
                out.append(Cut(f"label:{label}", "missing", "index hit not in store", f.hits))
            elif score <= 0 and floored:
                out.append(Cut(uri, "below_threshold", "no lane scored it above its floor", f.hits))
            elif only:
                out.append(self._blame_decay(Cut(uri, reason, detail, f.hits), lonely.get(label), clock))
            else:
                out.append(Cut(uri, reason, detail, f.hits))
        return out

    def _line_cost(self, memory: Shown, text: str, truncated: bool) -> int:
        """Tokens of ``memory``'s rendered page line, its line break included.

        A line is a function of its time, source, uri and text; its cost is kept per such key (a
        bounded map of ints). ``lines.line`` skips neutralising text that needs none.
        """
        estimate = self.config.token_estimator
        if truncated:
            return estimate(line(memory.created_at, memory.source.value, memory.uri, text, True) + "\n")
        key = (memory.uri, text, memory.source, memory.created_at, estimate)
        cost = self._line_costs.get(key)
        if cost is None:
            if len(self._line_costs) >= LINE_COST_CACHE:
                self._line_costs = {}
            cost = self._line_costs[key] = estimate(
                line(memory.created_at, memory.source.value, memory.uri, text) + "\n"
            )
        return cost

    def _reserve_for_unembedded(self, fused: FusedOrder, places: int) -> FusedOrder:
        """Move the best salience finds up to the last ``salience_reserve`` of the first ``places``.

        The salience lane only ranks what the semantic lane cannot see yet (in the default mode):
        this is what makes a memory written a moment ago recallable before it is embedded. When
        the semantic lane found nothing (no vectors yet, embedder down) no memory has a semantic
        score, none is at a disadvantage, and fusion alone orders them.
        """
        reserve = min(self.config.salience_reserve, places)
        if not reserve or not fused.hit_by("semantic").any():
            return fused
        cut = max(places - reserve, 0)
        salient = np.flatnonzero(fused.hit_by("salience"))
        fresh = salient[salient >= cut][:reserve]
        if not len(fresh):
            return fused
        labels = fused.label_array()
        head = np.arange(min(cut, len(fused)), dtype=np.int64)
        tail = np.arange(cut, len(fused), dtype=np.int64)
        chosen = np.concatenate([labels[head], labels[fresh]])
        rest = tail[~np.isin(labels[tail], chosen)]
        return fused.reordered(np.concatenate([head, fresh, rest]))

    def _blame_decay(self, cut: Cut, memory: Shown | None, now: datetime) -> Cut:
        """A memory only the salience lane found, cut for room while decay had shrunk it: say so."""
        if memory is None or set(cut.lanes) != {"salience"} or cut.reason not in ("top_k", "budget"):
            return cut
        half = self.config.half_life_days.get(memory.type.value, self.config.default_half_life_days)
        age = max(0.0, (now - memory.created_at).total_seconds() / 86400.0)
        factor = 0.5 ** (age / half)
        if factor >= 0.5:
            return cut
        detail = f"{cut.detail}; recency ×{factor:.2f} (age {age:.0f} d, half-life {half:.0f} d)"
        return Cut(cut.uri, "decay", detail, cut.lanes)

    def salience_parts(self, snippets: Sequence[Snippet]) -> dict[str, SalienceBreakdown]:
        """The salience score of each snippet that lane found, split into its terms."""
        labels = [s.label for s in snippets if "salience" in s.lanes]
        if not labels:
            return {}
        params = params_from_config(self.config, self.clock())
        return {m.uri: salience_score(m, params) for m in self.store.get_many(self.actor, labels).values()}

    def recall(
        self,
        query: str | None = None,
        types: Sequence[str | MemoryType] | None = None,
        since: Any = None,
        until: Any = None,
        limit: int = 20,
        offset: int = 0,
        *,
        source: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[Memory]:
        """Deliberate look-up. Without a query: newest first. With one: every match of the lexical
        query syntax (words AND'ed; ``OR``, ``NOT``/``-word``, ``"exact phrase"``, ``prefix*``,
        parentheses), best BM25 first. Filters apply to both; results are paginated. ``metadata``
        keeps memories with exactly those metadata values (``{"project": "atlas"}``)."""
        keep = where_of(tags, metadata)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit must be a positive integer, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInput(f"offset must be an integer >= 0, got {offset!r}")
        kinds = [check_type(t) for t in types] if types else None
        try:
            sources = [Source(s) for s in source] if source else None
        except ValueError:
            raise InvalidInput(f"source must be among {[s.value for s in Source]}, got {source!r}") from None
        lo = parse_since(since) if since is not None else None
        hi = parse_time(until, "until") if until is not None else None
        if not query:
            if not keep.metadata:
                return self.store.query(
                    self.actor, types=kinds, since=lo, until=hi, sources=sources, tags=tags, limit=limit, offset=offset
                )
            # the stores filter by tags in SQL; metadata values are matched here, over every candidate
            rows = self.store.query(
                self.actor, types=kinds, since=lo, until=hi, sources=sources, tags=tags, limit=1_000_000_000
            )
            return [m for m in rows if keep.matches(m)][offset : offset + limit]
        matches = self.lexical.match(check_text(query, self.config.max_text_bytes, "query"))
        memories = self.store.get_many(self.actor, [label for label, _ in matches])
        hits = [
            m
            for m in (memories.get(label) for label, _ in matches)
            if m is not None
            and (kinds is None or m.type in kinds)
            and (sources is None or m.source in sources)
            and (lo is None or m.created_at >= lo)
            and (hi is None or m.created_at < hi)
            and keep.matches(m)
        ]
        return hits[offset : offset + limit]
