"""The generated knowledge-update workload: deterministic, in LongMemEval's format, and built so
that only recency (updates) or importance (marked-important) can pick the answer."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mempager.evaluation import longmemeval, updates

FIELDS = {
    "question_id",
    "question_type",
    "question",
    "answer",
    "question_date",
    "haystack_dates",
    "haystack_session_ids",
    "haystack_sessions",
    "answer_session_ids",
    "superseded_session_ids",
}


def test_deterministic_and_prefix_stable() -> None:
    assert updates.generate(30, seed=7) == updates.generate(30, seed=7)
    assert updates.generate(30, seed=7) != updates.generate(30, seed=8)
    assert updates.generate(30, seed=7)[:12] == updates.generate(12, seed=7)  # --limit and :N agree
    assert updates.generate(0) == []
    with pytest.raises(ValueError):
        updates.generate(-1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_format_and_construction(seed: int) -> None:
    questions = updates.generate(60, seed)
    assert Counter(q["question_type"] for q in questions) == dict.fromkeys(updates.QUESTION_TYPES, 20)
    assert len({q["question_id"] for q in questions}) == 60
    for q in questions:
        assert set(q) == FIELDS and not q["question_id"].endswith("_abs")
        ids, sessions = q["haystack_session_ids"], q["haystack_sessions"]
        assert len(ids) == len(sessions) == len(q["haystack_dates"]) and len(set(ids)) == len(ids)
        dates = [longmemeval.parse_date(d, "date") for d in q["haystack_dates"]]
        assert dates == sorted(dates) and longmemeval.parse_date(q["question_date"], "q") > dates[-1]
        answers, older = q["answer_session_ids"], q["superseded_session_ids"]
        assert len(answers) == 1 and 1 <= len(older) <= 3 and not set(answers) & set(older)
        assert set(answers) | set(older) <= set(ids)
        assert 6 <= len(ids) - len(answers) - len(older) <= 10  # distractor sessions
        by_id = dict(zip(ids, sessions, strict=True))
        when = dict(zip(ids, dates, strict=True))
        facts = [answers[0], *older]
        statements = [next(t for t in by_id[sid] if t.get("has_answer")) for sid in facts]
        assert q["answer"] in statements[0]["content"]
        # each fact session states a different value, each in a different phrasing
        assert all(q["answer"] not in s["content"] for s in statements[1:])
        assert len({s["content"].replace(q["answer"], "") for s in statements}) == len(statements)
        for turn in (t for s in sessions for t in s):
            assert turn["role"] in ("user", "assistant") and turn["content"].strip()
        newest = when[answers[0]] > max(when[sid] for sid in older)
        marked = [s.get("importance") for s in statements]
        if q["question_type"] == "marked-important":
            assert not newest  # recency alone picks a wrong one
            assert marked == [1.0] + [None] * len(older)
        else:
            assert newest and marked == [None] * len(statements)


def test_importance_is_not_a_giveaway() -> None:
    """Distractor sessions carry importance markers too, and no text says "important": only the
    marker on the memory can tell the marked candidate apart."""
    questions = updates.generate(60)
    noise_marked = 0
    for q in questions:
        facts = set(q["answer_session_ids"]) | set(q["superseded_session_ids"])
        for sid, session in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            if sid not in facts:
                noise_marked += any(t.get("importance") for t in session)
        assert "important" not in json.dumps(q["haystack_sessions"]).lower()
    assert noise_marked >= 30


def test_loads_through_the_harness(tmp_path: Path) -> None:
    loaded, name, source = longmemeval.load("generated:updates:9:3")
    assert name == "longmemeval_updates" and source == {"generator": "updates", "n": 9, "seed": 3}
    assert len(loaded.questions) == 9 and loaded.skipped == {}
    raw = updates.generate(9, 3)
    for q, item in zip(loaded.questions, raw, strict=True):
        assert len(q.answers) == 1 and len(q.superseded) == len(item["superseded_session_ids"])
        important = [t for s in q.sessions for t in s.turns if t.importance is not None]
        assert all(t.importance == 1.0 for t in important)
    path = updates.write(tmp_path / "u.json", 9, 3)
    assert json.loads(path.read_text()) == raw
    assert longmemeval.load(str(path))[0].questions == loaded.questions


def test_module_main_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "updates.json"
    proc = subprocess.run(
        [sys.executable, "-m", "mempager.evaluation.updates", str(out), "--n", "5", "--seed", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data: list[dict[str, Any]] = json.loads(out.read_text())
    assert data == updates.generate(5, 2) and "5 questions" in proc.stdout
