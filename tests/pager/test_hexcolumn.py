"""Packed hex columns (the mirror's ids and content hashes) give back exactly what was written."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.store.hexcolumn import HexColumn, select
from mempager.validate import DIGEST_BITS, content_digest

hex16 = st.text("0123456789abcdef", min_size=16, max_size=16)
values = st.one_of(
    hex16,  # packs
    hex16.map(str.upper),  # upper case: kept as is
    st.text("0123456789abcdef", min_size=0, max_size=20),  # another length
    st.text(max_size=17),  # anything, non-ASCII included
    st.none(),
)


@settings(max_examples=200)
@given(ops=st.lists(st.tuples(st.sampled_from(["set", "set_many", "clear"]), st.integers(0, 11), values), max_size=40))
def test_every_value_reads_back_as_written(ops: list[tuple[str, int, str | None]]) -> None:
    column, model = HexColumn(16, 4), {}  # grown past its first capacity below
    column.grow(12)
    kept: set[int] = set()  # rows whose value does not pack: held beside the words
    for op, row, value in ops:
        if op == "set":
            column.set(row, value)
            model[row] = value
        elif op == "set_many":
            other = (row + 5) % 12
            column.set_many(np.array([row, other], np.int64), [value, "0123456789abcdef"])
            model[row], model[other] = value, "0123456789abcdef"
            kept.discard(other)
        else:
            column.clear(row)
            model[row] = None
        if op != "clear" and not _packs(value):
            kept.add(row)
        else:
            kept.discard(row)
    rows = np.array(sorted(model), np.int64)
    assert column.take(rows) == [model[r] for r in rows.tolist()]
    assert all(column.get(r) == model[r] for r in model)
    assert set(column.odd) == kept


def _packs(value: str | None) -> bool:
    return isinstance(value, str) and len(value) == 16 and all(c in "0123456789abcdef" for c in value)


def test_a_hash_packs_into_four_words_and_its_head_is_the_content_digest() -> None:
    hashes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(50)]
    column = HexColumn(64, 50)
    odd = ["NOT-HEX", hashes[0].upper()]
    column.set_many(np.arange(52, dtype=np.int64) % 50, [*hashes, *odd])  # rows 0 and 1 rewritten, odd
    assert column.packed.nbytes == 50 * 32 and column.odd == {0: "NOT-HEX", 1: hashes[0].upper()}
    heads, unpacked = column.head(np.arange(50, dtype=np.int64), DIGEST_BITS)
    assert unpacked.tolist() == [0, 1]
    assert heads[2:].tolist() == [content_digest(h) for h in hashes[2:]]
    column.set(0, hashes[0])  # packs again: the odd value is gone, not shadowing it
    assert column.get(0) == hashes[0] and 0 not in column.odd
    column.clear(2)
    assert column.get(2) is None and not column.packed[2].any()  # the digits are overwritten
    column.set_many(np.array([3, 4, 3], np.int64), ["odd", hashes[4], hashes[9]])  # a row twice: the last wins
    assert column.take(np.array([3, 4], np.int64)) == [hashes[9], hashes[4]] and 3 not in column.odd


def test_select_packs_in_sql_what_the_column_packs_in_python() -> None:
    import duckdb

    # upper case, underscores and spaces cast as hex in DuckDB: none of them may pack
    rows = ["0123456789abcdef", "0123456789ABCDEF", "abc", None, "ffffffffffffffff", "é" * 16, "0123456789ab_def"]
    rows += ["0123456789abcde ", " 123456789abcdef", "0123456789abcdeg", "+123456789abcdef", "00000000000000000"]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (i INTEGER, id VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(rows)))
    inner, outer = select("id", 16)
    cols = con.execute(f"SELECT {outer} FROM (SELECT *, {inner} FROM t) ORDER BY i").fetchnumpy()
    at = np.arange(2, 2 + len(rows), dtype=np.int64)
    loaded, written = HexColumn(16, len(at) + 2), HexColumn(16, len(at) + 2)
    loaded.load(2, cols, "id")
    written.set_many(at, rows)
    assert loaded.take(at) == rows
    assert (loaded.packed == written.packed).all() and (loaded.unpacked[2:] == written.unpacked[2:]).all()
    assert loaded.unpacked[at].tolist() == [r is None or not _packs(r) for r in rows]
