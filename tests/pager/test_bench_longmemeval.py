"""`mempager bench longmemeval` end to end on a small file in LongMemEval's format (hash embedder).

The data is built so the answer turns are the only ones sharing words with their question, so
the ranking it implies is known: the numbers the CLI reports are checked against it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mempager.evaluation import longmemeval

SESSION_IDS = {
    "dog": "answer_zq7xkp01_1",
    "soup": "noise_vb93mtq2_2",
    "peru": "noise_kd81wrz3_3",
    "berlin": "answer_mm40hhc4_1",
    "podcast": "noise_tt22pqa5_2",
    "boston": "answer_mm40hhc4_2",
    "stretch": "noise_yy61lkb6_4",
    "abs": "answer_abs9xq77_1",
    "abs-noise": "noise_abs9xq78_2",
    "lisbon": "answer_ku55lisb_1",
    "osaka": "answer_ku55osak_2",
    "plant": "noise_ku55plnt_3",
    "acme": "answer_wk11acme_1",
    "globex": "answer_wk11glbx_2",
    "ounce": "noise_wk11ounc_3",
}


def _session(*turns: str) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]


def _question(
    qid: str, qtype: str, text: str, sessions: list[tuple[str, str, list[dict[str, Any]]]], **more: Any
) -> dict[str, Any]:
    answers = more.pop("answers")
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": text,
        "answer": "n/a",
        "question_date": "2023/12/01 (Fri) 10:00",
        "haystack_session_ids": [SESSION_IDS[key] for key, _, _ in sessions],
        "haystack_dates": [date for _, date, _ in sessions],
        "haystack_sessions": [turns for _, _, turns in sessions],
        "answer_session_ids": [SESSION_IDS[key] for key in answers],
        **more,
    }


def dataset() -> list[dict[str, Any]]:
    return [
        _question(
            "q1_single",
            "single-session-user",
            "What breed is my dog Biscuit?",
            [
                (
                    "soup",
                    "2023/05/01 (Mon) 09:00",
                    _session("Give me a lentil soup recipe.", "Onions, carrots, cumin."),
                ),
                ("dog", "2023/05/03 (Wed) 18:30", _session("My dog Biscuit is a corgi breed.", "Lovely!")),
                ("peru", "2023/05/09 (Tue) 12:00", _session("What is the capital of Peru?", "Lima.")),
            ],
            answers=["dog"],
        ),
        _question(
            "q2_multi",
            "multi-session",
            "Which marathon races did I run, Berlin marathon and Boston marathon?",
            [
                ("berlin", "2023/03/01 (Wed) 08:00", _session("I ran the Berlin marathon race.", "Well done!")),
                ("podcast", "2023/03/15 (Wed) 20:00", _session("Recommend an astronomy podcast?", "Try StarTalk.")),
                ("boston", "2023/04/20 (Thu) 07:00", _session("I ran the Boston marathon race.", "Great job!")),
                ("stretch", "2023/04/22 (Sat) 07:00", _session("A stretch for my back?", "Cat-cow, slowly.")),
            ],
            answers=["berlin", "boston"],
        ),
        _question(
            "q3_abs",
            "single-session-user",
            "What colour is my kayak?",
            [
                ("abs", "2023/01/01 (Sun) 10:00", _session("My kayak is bright yellow.", "Nice.")),
                ("abs-noise", "2023/01/02 (Mon) 10:00", _session("How tall is Everest?", "8849 m.")),
            ],
            answers=["abs"],
        ),
        _question(  # the newest statement matches the question best: the newest wins
            "q4_update",
            "knowledge-update",
            "Where do I live now?",
            [
                ("lisbon", "2023/02/01 (Wed) 10:00", _session("I live in Lisbon.", "Noted.")),
                ("plant", "2023/03/01 (Wed) 10:00", _session("Name for a cactus?", "Spike.")),
                ("osaka", "2023/06/01 (Thu) 10:00", _session("I live now in Osaka, now settled.", "Noted.")),
            ],
            answers=["osaka"],
            superseded_session_ids=[SESSION_IDS["lisbon"]],
        ),
        _question(  # the superseded statement matches best: it ranks first and the newest loses
            "q5_update",
            "knowledge-update",
            "Where do I work now?",
            [
                ("acme", "2023/02/01 (Wed) 10:00", _session("I work now at Acme, right now.", "Noted.")),
                ("ounce", "2023/03/01 (Wed) 10:00", _session("Grams in an ounce?", "About 28.35.")),
                ("globex", "2023/06/01 (Thu) 10:00", _session("I work at Globex.", "Noted.")),
            ],
            answers=["globex"],
            superseded_session_ids=[SESSION_IDS["acme"]],
        ),
    ]


def _bench(tmp_path: Path, data: str, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mempager", "bench", "longmemeval", "--data", data, "--embedder", "hash", *more],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("lme")
    (tmp / "lme.json").write_text(json.dumps(dataset()))
    proc = _bench(tmp, str(tmp / "lme.json"), "--out", str(tmp / "out"), "--keep-stores", str(tmp / "stores"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp, proc, json.loads((tmp / "out" / "longmemeval.json").read_text())


def test_abstention_skipped_and_counts(run: tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    _, proc, result = run
    assert result["questions"] == 4 and result["skipped"] == {"abstention (_abs)": 1}
    assert result["memories"] == 2 * (3 + 4 + 3 + 3)  # one memory per turn, the _abs haystack not stored
    groups = result["groups"]
    assert {name: g["questions"] for name, g in groups.items()} == {
        "overall": 4,
        "knowledge-update": 2,
        "multi-session": 1,
        "single-session-user": 1,
    }
    assert "longmemeval:" in proc.stderr and "item" in proc.stderr  # progress shown (tqdm)
    assert "session R@10 strict 1.000, any-hit 1.000 over 4 questions" in proc.stdout


def test_recall_matches_the_data(run: tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    groups = run[2]["groups"]
    # R@1: q1 and q4 find their one answer session; q2 finds one of its two (any-hit, not strict);
    # in q5 the superseded statement ranks first, so its answer session is missed
    overall = groups["overall"]
    assert overall["strict"]["at_k"]["1"] == pytest.approx(2 / 4)
    assert overall["any_hit"]["at_k"]["1"] == pytest.approx(3 / 4)
    multi = groups["multi-session"]
    assert multi["strict"]["at_k"]["1"] == 0.0 and multi["any_hit"]["at_k"]["1"] == 1.0
    assert multi["strict"]["at_k"]["3"] == 1.0  # the two marathon turns are the top two
    update = groups["knowledge-update"]
    assert update["strict"]["at_k"]["1"] == update["any_hit"]["at_k"]["1"] == 0.5
    assert groups["single-session-user"]["strict"]["at_k"]["1"] == 1.0
    for g in groups.values():
        for key in ("strict", "any_hit"):
            rates = g[key]
            assert set(rates["at_k"]) == {"1", "3", "5", "10", "20"}
            assert set(rates["at_budget"]) == {"250", "500", "1000", "2000", "4000"}
            for k in ("3", "5", "10", "20"):
                assert rates["at_k"][k] == 1.0  # every answer turn shares words with its question
            assert all(v == 1.0 for v in rates["at_budget"].values())  # short turns: 250 tokens hold several
            assert rates["page"] == 1.0
        for kind in ("at_k", "at_budget"):
            assert all(g["any_hit"][kind][c] >= g["strict"][kind][c] for c in g["strict"][kind])


def test_newest_wins(run: tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    _, proc, result = run
    # q4: Osaka (newest) ranks above Lisbon; q5: Acme (superseded) ranks above Globex
    assert result["newest_wins"] == {"contested": 2, "wins": 0.5, "wins_chance": 0.5}
    assert result["older_wins"] is None
    assert result["groups"]["knowledge-update"]["wins"] == 0.5
    assert "wins" not in result["groups"]["multi-session"]
    assert "newest wins 0.500 (chance 0.500)" in proc.stdout


def test_reports_written(run: tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    out = run[0] / "out"
    markdown = (out / "longmemeval.md").read_text()
    assert "| overall (4) strict | 0.500 |" in markdown and "| overall (4) any-hit | 0.750 |" in markdown
    assert "| multi-session (1) strict | 0.000 | 1.000 |" in markdown
    assert "4000 tok | page |" in markdown and "Does the right one win?" in markdown
    assert (out / "longmemeval.png").stat().st_size > 10_000


def test_no_session_id_reaches_the_store(run: tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    stores = run[0] / "stores"
    files = [p for p in stores.rglob("*") if p.is_file()]
    assert len(list(stores.glob("*.duckdb"))) == 4  # one store per question that ran
    blob = b"".join(p.read_bytes() for p in files)
    assert b"Biscuit" in blob and b"Globex" in blob  # the scan does see what was stored
    leaked = [sid for sid in SESSION_IDS.values() if sid.encode() in blob]
    assert leaked == []
    assert b"answer_" not in blob and b"noise_" not in blob
    assert not any(q["question_id"].encode() in blob for q in dataset())


def test_limit_and_generated_workload(tmp_path: Path) -> None:
    data = tmp_path / "lme.json"
    data.write_text(json.dumps(dataset()))
    proc = _bench(tmp_path, str(data), "--out", str(tmp_path / "a"), "--limit", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((tmp_path / "a" / "longmemeval.json").read_text())["questions"] == 2
    proc = _bench(tmp_path, "generated:updates:6", "--out", str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "b" / "longmemeval_updates.json").read_text())
    assert result["questions"] == 6 and result["source"] == {"generator": "updates", "n": 6, "seed": 0}
    # types cycle knowledge-update, preference-update, marked-important: 4 newest answers, 2 older
    assert result["newest_wins"]["contested"] == 4 and result["older_wins"]["contested"] == 2
    assert set(result["groups"]) == {"overall", "knowledge-update", "preference-update", "marked-important"}
    assert (tmp_path / "b" / "longmemeval_updates.md").exists()


def test_user_errors(tmp_path: Path) -> None:
    proc = _bench(tmp_path, str(tmp_path / "missing.json"))
    assert proc.returncode == 2 and "mempager: error: cannot read LongMemEval data" in proc.stderr
    proc = _bench(tmp_path, "generated:nope")
    assert proc.returncode == 2 and "generated:updates" in proc.stderr


def test_loader() -> None:
    loaded = longmemeval.parse(dataset())
    assert [q.qid for q in loaded.questions] == ["q1_single", "q2_multi", "q4_update", "q5_update"]
    multi = loaded.questions[1]
    assert multi.answers == {0, 2} and multi.superseded == frozenset()
    assert multi.sessions[0].date.isoformat() == "2023-03-01T08:00:00+00:00"
    assert multi.sessions[0].turns[0].memory_text() == "user: I ran the Berlin marathon race."
    assert loaded.questions[2].superseded == {0} and loaded.questions[2].answers == {2}
    broken = dataset()[:1]
    broken[0]["answer_session_ids"] = ["not_in_haystack"]
    assert longmemeval.parse(broken).skipped == {"no answer session in the haystack": 1}
