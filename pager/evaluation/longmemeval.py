"""`mempager bench longmemeval`: session-level recall on data in LongMemEval's JSON format.

Each question gets a fresh store (in a temporary directory) holding its own haystack, one memory
per turn: an event ``"<role>: <content>"`` dated by its session (``haystack_dates``; turns 30 s
apart so their order is kept). One memory per turn, not per session, because that is what an
agent writes and what the LoCoMo benchmark measures, and because a LongMemEval session (often
thousands of tokens) would not fit most of the token budgets measured here: a session-sized
memory would make "recall at 250 tokens" meaningless. A session counts as retrieved when any of
its turns is.

Session ids never reach the store: LongMemEval names answer sessions ``answer_…``, so an id in a
memory's text, tags or metadata would hand the answer to the lexical lane. Memories carry only
their text, time and (when a turn has one) importance; the harness keeps the side table
label -> session. Questions whose id ends in ``_abs`` (abstention) are skipped.

Every number is what the public ``retrieve`` and ``page`` return with the default configuration,
at the settings ``mempager bench locomo`` uses (``evalkit.settings``): R@k is
``retrieve(question, k=k)``, a budget column ``retrieve(question, k=budget, budget=budget)``, and
``page`` the retrieved section of ``page(question)``. Strict: every answer session retrieved;
any-hit: at least one. The pager's clock is set to the question's date.

Two optional fields extend the format (``mempager.evaluation.updates`` writes them): a turn's
``importance`` (its memory's importance) and a question's ``superseded_session_ids`` (sessions that
state a value the answer overrides). With the latter, "wins" says whether, in
``retrieve(question, k=20)``, the first memory from any of those sessions or the answer sessions
belongs to an answer session.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, InvalidTime
from mempager.evaluation import evalkit, updates
from mempager.evaluation.evalkit import Setting
from mempager.protocols import Embedder
from mempager.types import Snippet
from mempager.validate import parse_time

if TYPE_CHECKING:
    from mempager.core import Pager

ACTOR = "lme"  # one constant actor: nothing about the question reaches the store
GENERATED = "generated:"
WINS_K = 20
_WEEKDAY = re.compile(r"\s*\([A-Za-z]{3}\)\s*")


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    content: str
    importance: float | None = None

    def memory_text(self) -> str:
        return f"{self.role}: {self.content}"


@dataclass(frozen=True, slots=True)
class Session:
    date: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    qid: str  # kept for reports; never written to the store
    qtype: str
    text: str
    date: datetime | None
    sessions: tuple[Session, ...]
    answers: frozenset[int]  # indexes into ``sessions``: the session ids stay in the loader
    superseded: frozenset[int] = frozenset()


@dataclass
class Loaded:
    questions: list[Question]
    skipped: dict[str, int] = field(default_factory=dict)


def parse_date(text: object, what: str) -> datetime:
    """LongMemEval's ``2023/05/20 (Sat) 02:21`` (the weekday dropped), or anything ``parse_time`` reads."""
    return parse_time(_WEEKDAY.sub(" ", text).strip() if isinstance(text, str) else text, what)


def parse(data: object) -> Loaded:
    if not isinstance(data, list):
        raise InvalidInput("LongMemEval data must be a JSON list of questions")
    loaded = Loaded([])
    for n, item in enumerate(data):
        if not isinstance(item, dict):
            raise InvalidInput(f"question {n} must be an object, got {type(item).__name__}")
        qid = str(item.get("question_id", n))
        try:
            question = None if qid.endswith("_abs") else _question(qid, item)
        except KeyError as exc:
            raise InvalidInput(f"question {qid}: missing field {exc}") from None
        if question is None:
            why = "abstention (_abs)" if qid.endswith("_abs") else "no answer session in the haystack"
            loaded.skipped[why] = loaded.skipped.get(why, 0) + 1
        else:
            loaded.questions.append(question)
    return loaded


def _question(qid: str, item: Mapping[str, Any]) -> Question | None:
    raw_sessions, dates, ids = item["haystack_sessions"], item["haystack_dates"], item["haystack_session_ids"]
    if not (len(raw_sessions) == len(dates) == len(ids)):
        raise InvalidInput(
            f"question {qid}: haystack_sessions, haystack_dates and haystack_session_ids differ in length"
        )
    sessions: list[Session] = []
    where: dict[str, list[int]] = {}
    for i, (raw, date, sid) in enumerate(zip(raw_sessions, dates, ids, strict=True)):
        sessions.append(Session(parse_date(date, f"question {qid}: haystack_dates[{i}]"), _turns(qid, raw)))
        where.setdefault(str(sid), []).append(i)

    def indexes(key: str) -> frozenset[int]:
        return frozenset(i for sid in item.get(key) or () for i in where.get(str(sid), ()))

    answers = indexes("answer_session_ids")
    if not answers:
        return None
    try:
        asked: datetime | None = parse_date(item.get("question_date"), "question_date")
    except InvalidTime:
        asked = None
    superseded = indexes("superseded_session_ids") - answers
    return Question(qid, str(item["question_type"]), str(item["question"]), asked, tuple(sessions), answers, superseded)


def _turns(qid: str, raw: object) -> tuple[Turn, ...]:
    if not isinstance(raw, list):
        raise InvalidInput(f"question {qid}: a haystack session must be a list of turns")
    out = []
    for turn in raw:
        if not isinstance(turn, dict):
            raise InvalidInput(f"question {qid}: a turn must be an object with role and content")
        content = str(turn.get("content") or "")
        if not content.strip():
            continue
        importance = turn.get("importance")
        if importance is not None:
            if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
                raise InvalidInput(f"question {qid}: a turn's importance must be a number in [0, 1]")
            importance = float(importance)
        out.append(Turn(str(turn.get("role") or "user"), content, importance))
    return tuple(out)


def load(spec: str) -> tuple[Loaded, str, dict[str, Any]]:
    """``FILE`` or ``generated:updates[:N[:SEED]]``: the questions, the results' file name, and
    what to record about the source."""
    if spec.startswith(GENERATED):
        kind, *rest = spec[len(GENERATED) :].split(":")
        if kind != "updates" or len(rest) > 2:
            raise InvalidInput(f"unknown generated data {spec!r}; use generated:updates[:N[:SEED]]")
        try:
            n = int(rest[0]) if rest and rest[0] else updates.DEFAULT_N
            seed = int(rest[1]) if len(rest) > 1 else 0
        except ValueError:
            raise InvalidInput(f"generated:updates takes integers, got {spec!r}") from None
        if n < 1:
            raise InvalidInput(f"generated:updates needs at least one question, got {n}")
        return parse(updates.generate(n, seed)), "longmemeval_updates", {"generator": "updates", "n": n, "seed": seed}
    try:
        data = json.loads(Path(spec).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInput(
            f"cannot read LongMemEval data at {spec}: {exc}; pass --data FILE.json or generated:updates"
        ) from exc
    return parse(data), "longmemeval", {"file": Path(spec).name}


# -- evaluation ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    qtype: str
    strict: Mapping[str, bool]  # column ("at_k 10", "at_budget 250", "page") -> every answer session retrieved
    any_hit: Mapping[str, bool]
    memories: int
    wins: bool | None = None  # None: no superseded sessions
    newest: bool | None = None  # the answer sessions are dated after every superseded one
    chance: float | None = None  # wins of a random order of the competing sessions


def column(s: Setting) -> str:
    return f"{s.kind} {s.value}"


def evaluate(
    questions: Sequence[Question], embedder: Embedder, config: PagerConfig, keep: Path | None = None
) -> list[Outcome]:
    """One fresh store per question (in ``keep`` when given, else a temporary directory)."""
    plan = evalkit.settings(config)
    outcomes: list[Outcome] = []
    total = sum(len(s.turns) for q in questions for s in q.sessions) + len(questions)
    with evalkit.progress_bar(total, "longmemeval") as bar, tempfile.TemporaryDirectory() as tmp:
        root = keep if keep is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for n, q in enumerate(questions):
            outcomes.append(_one(root / f"q{n:05d}.duckdb", q, embedder, config, plan))
            bar.update(outcomes[-1].memories + 1)
    return outcomes


def _one(path: Path, q: Question, embedder: Embedder, config: PagerConfig, plan: Sequence[Setting]) -> Outcome:
    import mempager

    with mempager.open(path, actor=ACTOR, config=config, embedder=embedder) as p:
        if q.date is not None:
            asked = q.date
            p.clock = lambda: asked  # "now" is when the question is asked
        owners = _write(p, q)
        retrieved: dict[str, list[Snippet]] = {column(s): p.retrieve(q.text, k=s.k, budget=s.budget) for s in plan}
        retrieved["page"] = list(p.page(q.text).snippets)

    def sessions(snippets: Iterable[Snippet]) -> set[int]:
        return {i for s in snippets for i in owners.get(s.label, ())}

    found = {name: sessions(snippets) for name, snippets in retrieved.items()}
    strict = {name: q.answers <= got for name, got in found.items()}
    any_hit = {name: bool(q.answers & got) for name, got in found.items()}
    memories = sum(len(s.turns) for s in q.sessions)
    if not q.superseded:
        return Outcome(q.qtype, strict, any_hit, memories)
    wins = False
    for snippet in retrieved[f"at_k {WINS_K}"]:
        mine = set(owners.get(snippet.label, ()))
        if mine & (q.answers | q.superseded):
            wins = bool(mine & q.answers) and not mine & q.superseded
            break
    newest = min(q.sessions[i].date for i in q.answers) > max(q.sessions[i].date for i in q.superseded)
    chance = len(q.answers) / (len(q.answers) + len(q.superseded))
    return Outcome(q.qtype, strict, any_hit, memories, wins, newest, chance)


def _write(p: Pager, q: Question) -> dict[int, frozenset[int]]:
    """Every turn a memory; returns the side table label -> sessions (two turns that are the same
    event deduplicate into one memory, which then belongs to both sessions)."""
    items: list[dict[str, Any]] = []
    owner: list[int] = []
    for index, session in enumerate(q.sessions):
        for i, turn in enumerate(session.turns):
            item: dict[str, Any] = {
                "type": "event",
                "text": turn.memory_text(),
                "created_at": session.date + timedelta(seconds=30 * i),
            }
            if turn.importance is not None:
                item["importance"] = turn.importance
            items.append(item)
            owner.append(index)
    uris = p.remember_many(items)
    p.sync()
    table: dict[int, set[int]] = {}
    for uri, index in zip(uris, owner, strict=True):
        table.setdefault(p.get(uri).label, set()).add(index)
    return {label: frozenset(s) for label, s in table.items()}


# -- summaries and reports -----------------------------------------------------------------------


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Overall and per question_type: strict and any-hit recall per column, and "wins"."""
    groups = {"overall": list(outcomes)}
    for qtype in sorted({o.qtype for o in outcomes}):
        groups[qtype] = [o for o in outcomes if o.qtype == qtype]
    return {name: _group(members) for name, members in groups.items()}


def _group(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(outcomes)}
    for key in ("strict", "any_hit"):
        rates: dict[str, Any] = {"at_k": {}, "at_budget": {}}
        for name in getattr(outcomes[0], key) if outcomes else ():
            value = sum(getattr(o, key)[name] for o in outcomes) / len(outcomes)
            if name == "page":
                rates["page"] = value
            else:
                kind, number = name.split()
                rates[kind][int(number)] = value
        out[key] = rates
    out.update(_wins(outcomes))
    return out


def _wins(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    contested = [o for o in outcomes if o.wins is not None]
    if not contested:
        return {}
    return {
        "contested": len(contested),
        "wins": sum(bool(o.wins) for o in contested) / len(contested),
        "wins_chance": sum(o.chance or 0.0 for o in contested) / len(contested),
    }


def run(
    data: str,
    embedder: Embedder,
    config: PagerConfig,
    out_dir: Path,
    limit: int | None = None,
    keep: Path | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    loaded, name, source = load(data)
    questions = loaded.questions[:limit]
    if not questions:
        raise InvalidInput(f"no question to run in {data} (skipped: {loaded.skipped or 'none'})")
    config = replace(config, embedder="auto")
    started = time.perf_counter()
    outcomes = evaluate(questions, embedder, config, keep)
    newest = [o for o in outcomes if o.newest is True]
    older = [o for o in outcomes if o.newest is False]
    result: dict[str, Any] = {
        "name": name,
        "source": source,
        "questions": len(outcomes),
        "skipped": dict(loaded.skipped),
        "memories": sum(o.memories for o in outcomes),
        "groups": summarize(outcomes),
        "newest_wins": _wins(newest) or None,
        "older_wins": _wins(older) or None,
        "embedder": embedder.name,
        "fusion": config.fusion,
        "lane_weights": dict(config.lane_weights),
        "salience_mode": config.salience_mode,
        "retrieval_budget_tokens": config.retrieval_budget_tokens,
        "seconds": round(time.perf_counter() - started, 1),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **dict(extra or {}),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    (out_dir / f"{name}.md").write_text(markdown(result))
    plot(result, out_dir / f"{name}.png")
    return result


COLUMNS = (
    [("at_k", k, f"R@{k}") for k in evalkit.KS]
    + [("at_budget", b, f"{b} tok") for b in evalkit.BUDGETS]
    + [("page", None, "page")]
)


def _cells(rates: Mapping[str, Any]) -> list[float | None]:
    out: list[float | None] = []
    for kind, value, _ in COLUMNS:
        if kind == "page":
            out.append(rates.get("page"))
        else:
            got = {int(k): float(v) for k, v in rates[kind].items()}
            out.append(got.get(int(value or 0)))
    return out


def _row(name: str, cells: Sequence[float | str | None]) -> str:
    shown = [f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v)) for v in cells]
    return f"| {name} | " + " | ".join(shown) + " |"


def markdown(result: Mapping[str, Any]) -> str:
    groups = result["groups"]
    skipped = ", ".join(f"{n} {why}" for why, n in result["skipped"].items()) or "none"
    source = " ".join(f"{k} {v}" for k, v in result["source"].items())
    lines = [
        f"# LongMemEval session recall: {result['name']} ({result['questions']} questions)",
        "",
        f"{result['date']} · {source} · embedder `{result['embedder']}` · fusion "
        f"`{result['fusion']}` weights {result['lane_weights']} · salience_mode `{result['salience_mode']}` · "
        f"{result['memories']} memories (one per turn) · {result['seconds']} s · skipped: {skipped}",
        "",
        "One fresh store per question holding its haystack, one memory per turn; session ids never reach "
        "the store (a side table maps memory -> session). A session is retrieved when any of its turns is. "
        f"R@k is `retrieve(question, k=k)` (default budget {result['retrieval_budget_tokens']} tokens), a "
        "budget column `retrieve(question, k=budget, budget=budget)`, `page` the retrieved section of "
        "`page(question)`. Strict: every answer session retrieved; any-hit: at least one.",
        "",
        *_about_generated(result),
        "## Recall at k and at a token budget",
        "",
        "| question type / metric | " + " | ".join(label for *_, label in COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for name, g in groups.items():
        label = f"{name} ({g['questions']})"
        lines += [_row(f"{label} strict", _cells(g["strict"])), _row(f"{label} any-hit", _cells(g["any_hit"]))]
    contested = {name: g for name, g in groups.items() if "wins" in g}
    if contested:
        lines += [
            "",
            "## Does the right one win?",
            "",
            f"Questions with superseded sessions (an older value of the fact, or for `marked-important` the "
            f"candidates not marked important): in `retrieve(question, k={WINS_K})`, is the first memory from "
            "any of the competing sessions from the answer session? A ranking that ignores time and importance "
            "wins at about the rate of a random order of the competing sessions (chance).",
            "",
            "| question type | contested | wins | chance |",
            "|---|---|---|---|",
        ]
        lines += [_row(name, [g["contested"], g["wins"], g["wins_chance"]]) for name, g in contested.items()]
        for key, what in (("newest_wins", "the answer is the newest"), ("older_wins", "the answer is older")):
            w = result.get(key)
            if w:
                lines.append(_row(f"**{key}** ({what})", [w["contested"], w["wins"], w["wins_chance"]]))
    lines += ["", f"![recall at k and at a budget]({result['name']}.png)", ""]
    return "\n".join(lines)


def _about_generated(result: Mapping[str, Any]) -> list[str]:
    if result["source"].get("generator") != "updates":
        return []
    return [
        "The workload (`mempager.evaluation.updates`): each question asks about one slot of the user's life; "
        "2-4 fact sessions state different values of it at different times among 6-10 distractor sessions. "
        "`knowledge-update` and `preference-update`: the answer is the newest statement. `marked-important`: "
        "the answer is the one candidate whose memory is marked important (importance 1.0), never the newest; "
        "distractor sessions carry importance markers too. The statements are worded alike, so content "
        "matching finds the fact sessions but cannot tell which must win. One answer session per question: "
        "strict and any-hit coincide.",
        "",
    ]


def plot(result: Mapping[str, Any], path: Path) -> None:
    """Recall against k and against the token budget (strict solid, any-hit dashed, one colour per
    question type); with contested questions, a third panel: wins beside chance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = dict(sorted(result["groups"].items(), key=lambda item: item[0] != "overall"))  # overall first
    contested = {name: g for name, g in groups.items() if "wins" in g}
    fig, axes = plt.subplots(1, 3 if contested else 2, figsize=(15 if contested else 11, 4.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, kind, xlabel in (
        (axes[0], "at_k", "k: retrieve(question, k=k)"),
        (axes[1], "at_budget", "token budget of retrieve() (bytes/4, rendered lines)"),
    ):
        for n, (name, g) in enumerate(groups.items()):
            overall = name == "overall"
            for key, style in (("strict", "-"), ("any_hit", "--")):
                values = {int(k): float(v) for k, v in g[key][kind].items()}
                ax.plot(
                    list(values),
                    list(values.values()),
                    style,
                    color=colours[n % len(colours)],
                    marker="o" if overall else ".",
                    linewidth=2.5 if overall else 1.0,
                    label=f"{name} ({'strict' if key == 'strict' else 'any-hit'})",
                )
        ax.set_xscale("log")
        ax.minorticks_off()
        ticks = [int(v) for v in groups["overall"]["strict"][kind]]
        ax.set_xticks(ticks, [str(v) for v in ticks])
        ax.set_xlabel(xlabel)
        ax.set_ylabel("session recall")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    if contested:
        ax = axes[2]
        names = list(contested)
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [contested[n]["wins"] for n in names], 0.4, label="wins")
        ax.bar([x + 0.2 for x in xs], [contested[n]["wins_chance"] for n in names], 0.4, label="chance", alpha=0.5)
        ax.set_xticks(list(xs), names, rotation=20, fontsize=7)
        ax.set_ylabel(f"wins: answer first among the competing sessions (k={WINS_K})", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"LongMemEval session recall ({result['name']}) — {result['embedder']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
