"""An index opened from its saved postings behaves as one built from its tokens, through writes."""

from __future__ import annotations

import hashlib
import io
import json
import random
from pathlib import Path

import numpy as np
import pytest

from mempager.errors import IndexStale
from mempager.index.lexical import MANIFEST, LexicalIndex, State
from mempager.index.lexical_npz import member_crcs
from mempager.index.lexical_postings import PostingLists

WORDS = "alpha beta gamma delta omega river stone cloud ember frost main.py v1.2.3 user@example.com".split()


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 14))) for _ in range(n)]


QUERIES = ["alpha", "river stone", "omega frost ember", "main.py", "v1.2.3 cloud", "zeta", "alpha beta gamma delta"]
EXPLICIT = ['"river stone"', "alph*", "alpha -beta", "(cloud OR frost) ember", "user@example.com"]


def answers(index: LexicalIndex) -> list[object]:
    out: list[object] = [index.labels().tolist()]
    for q in QUERIES:
        out += [index.search(q, 7), index.search_scored(q, 9, [1, 2, 3, 500, 999])]
    out += [index.match(q) for q in EXPLICIT]
    return out


def reopened(index: LexicalIndex, directory: Path) -> LexicalIndex:
    index.save(directory, meta={"who": "test"})
    fresh = LexicalIndex()
    fresh.load(directory, expect_meta={"who": "test"})
    return fresh


def test_saved_postings_answer_as_the_tokens_do(tmp_path: Path) -> None:
    built = LexicalIndex()
    built.add(list(range(600)), corpus(600))
    built.remove(range(0, 600, 7))
    built.add([5, 10, 700], ["alpha river", "stone stone stone", "ember omega"])  # re-worded, and new
    loaded = reopened(built, tmp_path / "a")
    assert isinstance(loaded._state.post, PostingLists) and loaded._state.post._base > 0
    assert answers(loaded) == answers(built)
    for index in (built, loaded):  # writes after opening: appends copy a term out of the block
        index.add(list(range(800, 900)), corpus(100, seed=3))
        index.add([11, 12], ["frost frost alpha", "main.py main.py"])
        index.remove(range(1, 300, 3))  # enough dead rows to compact terms, then the whole index
        index.remove(range(300, 600, 2))
    assert answers(loaded) == answers(built)
    again = reopened(loaded, tmp_path / "b")  # postings written from block views and own arrays alike
    assert answers(again) == answers(built)


def test_a_save_without_postings_still_loads(tmp_path: Path) -> None:
    built = LexicalIndex()
    built.add(list(range(300)), corpus(300, seed=5))
    built.save(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    path = tmp_path / manifest["data"]["name"]
    with np.load(path) as npz:
        old = {k: npz[k] for k in ("labels", "counts", "tok_term", "tok_pos", "vocab")}  # as saves before
    buf = io.BytesIO()
    np.savez(buf, **old)
    data = buf.getvalue()
    path.write_bytes(data)
    manifest["data"].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    del manifest["data"]["crc32"]  # saves before CRCs were kept: checked by the sha256
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    loaded = LexicalIndex()
    loaded.load(tmp_path)
    assert answers(loaded) == answers(built)


@pytest.mark.parametrize(
    "harm",
    [
        lambda ptr, post: (ptr[:-1], post),  # one term short
        lambda ptr, post: (ptr, post[:, :-1]),  # a posting short
        lambda ptr, post: (ptr, np.where(np.arange(post.shape[1]) == 3, 10**6, post)),  # a row out of range
        lambda ptr, post: (ptr, post * np.array([[1], [0]], np.int32)),  # zero tfs
    ],
)
def test_inconsistent_saved_postings_are_refused(tmp_path: Path, harm) -> None:  # type: ignore[no-untyped-def]
    built = LexicalIndex()
    built.add(list(range(200)), corpus(200, seed=2))
    built.save(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    path = tmp_path / manifest["data"]["name"]
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["post_ptr"], arrays["post"] = harm(arrays["post_ptr"], arrays["post"])
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    path.write_bytes(data)
    # checksummed as written: the postings checks, not the CRCs, must refuse it
    manifest["data"].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data), crc32=member_crcs(data))
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IndexStale, match="postings"):
        LexicalIndex().load(tmp_path)


def test_state_docs_postings_match_the_tokens() -> None:
    index = LexicalIndex()
    index.add(list(range(400)), corpus(400, seed=9))
    index.remove(range(0, 400, 5))
    docs = index._state.docs()
    assert docs.post is not None
    rebuilt = State.build(docs)
    from_tokens = State.build(type(docs)(docs.labels, docs.counts, docs.tok_term, docs.tok_pos, docs.terms))
    for term in range(len(docs.terms)):
        n = int(from_tokens.npost[term])
        assert np.array_equal(rebuilt.post[term][:, : int(rebuilt.npost[term])], from_tokens.post[term][:, :n])
