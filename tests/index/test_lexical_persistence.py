"""save/load: round trips exactly; anything damaged, foreign or mismatched raises IndexStale."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from mempager.errors import IndexStale, InvalidInput
from mempager.index.lexical import MANIFEST, LexicalIndex
from mempager.index.tokenize import TokenizerConfig

TEXTS = {
    3: "Deploy to staging failed: the vault key expired",
    8: "Crash in src/app/main.py at v1.2.3",
    21: "Caroline adopted two dogs",
    40: "Rotate the vault key every ninety days",
}
QUERIES = ["vault key", "main.py", "dogs caroline", "deploy", "v1.2.3"]
MATCHES = ['"vault key"', "ro*", "vault -deploy", "main.py OR dogs"]


def built() -> LexicalIndex:
    index = LexicalIndex()
    index.add(list(TEXTS), list(TEXTS.values()))
    index.add([99], ["a doc that is removed again"])
    index.remove([99])
    return index


def data_file(directory: Path) -> Path:
    name: str = json.loads((directory / MANIFEST).read_text())["data"]["name"]
    return directory / name


def test_round_trip(tmp_path: Path) -> None:
    index = built()
    index.save(tmp_path / "lex", meta={"model": "bm25", "seq": 12, "actor": ["neo"]})
    loaded = LexicalIndex()
    meta = loaded.load(tmp_path / "lex", expect_meta={"seq": 12, "actor": ("neo",)})  # tuples compare as lists
    assert meta == {"model": "bm25", "seq": 12, "actor": ["neo"]}
    assert loaded.labels().tolist() == index.labels().tolist() == [3, 8, 21, 40]
    assert len(loaded) == 4 and 99 not in loaded
    for query in QUERIES:
        assert loaded.search(query, 10) == index.search(query, 10)
    for query in MATCHES:
        assert loaded.match(query) == index.match(query)
    loaded.add([50], ["vault key again"])  # a loaded index keeps working incrementally
    assert 50 in dict(loaded.search("vault", 5))


def test_empty_round_trip(tmp_path: Path) -> None:
    LexicalIndex().save(tmp_path)
    loaded = LexicalIndex()
    loaded.load(tmp_path)
    assert len(loaded) == 0 and loaded.search("x", 3) == []


def test_saves_replace_files_and_leave_no_litter(tmp_path: Path) -> None:
    index = built()
    index.save(tmp_path)
    index.add([77], ["one more"])
    index.save(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and MANIFEST in names and data_file(tmp_path).name in names
    assert not any(name.endswith(".tmp") for name in names)
    loaded = LexicalIndex()
    loaded.load(tmp_path)
    assert 77 in loaded


def test_meta_must_be_plain_json(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="plain JSON"):
        built().save(tmp_path, meta={"when": object()})


def _truncate(d: Path) -> None:
    path = data_file(d)
    path.write_bytes(path.read_bytes()[:-10])


def _flip_bit(d: Path) -> None:
    path = data_file(d)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _edit_manifest(key: str, value: object) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        body = json.loads((d / MANIFEST).read_text())
        body[key] = value
        (d / MANIFEST).write_text(json.dumps(body))

    return edit


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated data": _truncate,
    "bit flip": _flip_bit,
    "data file missing": lambda d: data_file(d).unlink(),
    "manifest missing": lambda d: (d / MANIFEST).unlink(),
    "manifest garbage": lambda d: None if (d / MANIFEST).write_text("{not json") else None,
    "manifest not an object": lambda d: None if (d / MANIFEST).write_text("[1, 2]") else None,
    "count mismatch": _edit_manifest("count", 5),
    "max label mismatch": _edit_manifest("max_label", 41),
    "other format": _edit_manifest("format_version", 99),
    "other kind": _edit_manifest("kind", "hnsw"),
    "other tokenizer": _edit_manifest("tokenizer", "lex-tok-0"),
    "data outside the directory": _edit_manifest("data", {"name": "../x.npz", "sha256": "0" * 64, "size": 1}),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_raises_index_stale_and_keeps_the_current_contents(tmp_path: Path, damage: str) -> None:
    built().save(tmp_path)
    DAMAGE[damage](tmp_path)
    current = LexicalIndex()
    current.add([1], ["still here"])
    with pytest.raises(IndexStale, match="rebuild|build it"):
        current.load(tmp_path)
    assert current.labels().tolist() == [1]


def test_meta_mismatch_raises_index_stale(tmp_path: Path) -> None:
    built().save(tmp_path, meta={"model": "bm25", "seq": 12})
    with pytest.raises(IndexStale, match="meta 'seq' is 12, expected 13"):
        LexicalIndex().load(tmp_path, expect_meta={"seq": 13})
    with pytest.raises(IndexStale, match="meta 'actor'"):
        LexicalIndex().load(tmp_path, expect_meta={"actor": "neo"})


def test_an_index_with_another_tokenizer_is_stale(tmp_path: Path) -> None:
    built().save(tmp_path)
    with pytest.raises(IndexStale, match="tokenizer"):
        LexicalIndex(tokenizer=TokenizerConfig(stem="none")).load(tmp_path)


def test_missing_directory_is_stale(tmp_path: Path) -> None:
    with pytest.raises(IndexStale, match="no saved lexical index"):
        LexicalIndex().load(tmp_path / "nowhere")
