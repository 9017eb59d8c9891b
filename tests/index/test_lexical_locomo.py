"""BM25 evidence recall on LoCoMo, against the reference measured with bm25s (R@10 0.501).

Reads the data from the shared folder (never copied into the repo); skipped when it is absent.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from mempager.index.lexical import LexicalIndex

LOCOMO = Path(os.environ.get("MEMPAGER_LOCOMO", Path(__file__).resolve().parents[3] / "shared/data/locomo10.json"))


def conversations(path: Path) -> list[tuple[dict[str, str], list[tuple[str, set[str]]]]]:
    """Per sample: its turns by dia_id ("Speaker: text [shares photo: caption]") and its category 1-4
    questions with their evidence ids (malformed ids normalised, unresolvable ones skipped)."""
    out = []
    for sample in json.loads(path.read_text()):
        turns: dict[str, str] = {}
        for key, session in sample["conversation"].items():
            if not (key.startswith("session_") and isinstance(session, list)):
                continue  # date keys, and sessions without turns
            for turn in session:
                caption = f" [shares photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
                turns[turn["dia_id"]] = f"{turn['speaker']}: {turn['text']}{caption}"
        questions = []
        for qa in sample["qa"]:
            ids = {f"D{a}:{int(b)}" for e in qa.get("evidence", []) for a, b in re.findall(r"D:?(\d+):(\d+)", e)}
            evidence = ids & turns.keys()
            if qa["category"] in (1, 2, 3, 4) and evidence:
                questions.append((str(qa["question"]), evidence))
        out.append((turns, questions))
    return out


@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo data not found at {LOCOMO} (set MEMPAGER_LOCOMO)")
def test_locomo_evidence_recall_at_10() -> None:
    total, n = 0.0, 0
    for turns, questions in conversations(LOCOMO):
        ids = list(turns)
        index = LexicalIndex()  # one index per conversation, as the pager keeps one per actor
        index.add(list(range(len(ids))), [turns[i] for i in ids])
        for question, evidence in questions:
            top = {ids[label] for label, _ in index.search(question, 10)}
            total += len(evidence & top) / len(evidence)
            n += 1
    assert n == 1536
    recall = total / n
    assert recall >= 0.49, f"BM25 R@10 {recall:.3f} fell below the bm25s reference band (0.501)"
