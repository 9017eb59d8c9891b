"""LabelRows behaves as a dict of label -> row, dense labels in a table or sparse ones in a dict."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.index import labelmap
from mempager.index.labelmap import LabelRows

ops = st.lists(
    st.tuples(
        st.sampled_from(["set", "set_many", "pop"]),
        st.one_of(st.integers(0, 300), st.integers(-50, 50), st.integers(2**40, 2**40 + 5)),
        st.integers(0, 10_000),
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(ops, st.booleans())
def test_label_rows_is_a_dict(steps, small_floor) -> None:  # type: ignore[no-untyped-def]
    floor = labelmap._FLOOR
    labelmap._FLOOR = 64 if small_floor else floor  # small: sparse labels turn it into a dict early
    try:
        mine, truth = LabelRows(), {}
        for op, label, row in steps:
            if op == "set":
                mine[label] = row
                truth[label] = row
            elif op == "set_many":
                labels = np.arange(label, label + 5, dtype=np.int64)
                mine.set_many(labels, np.arange(row, row + 5))
                truth.update(zip(labels.tolist(), range(row, row + 5), strict=True))
            else:
                assert mine.pop(label) == truth.pop(label, None)
            assert len(mine) == len(truth)
        probe = np.array(sorted(truth) + [-999, 10**9], dtype=np.int64)
        assert mine.rows_of(probe).tolist() == [truth.get(x, -1) for x in probe.tolist()]
        assert mine.labels().tolist() == sorted(truth)
        assert dict(mine) == truth and dict(mine.items()) == truth
        assert all(mine.get(x) == truth.get(x) and (x in mine) == (x in truth) for x in probe.tolist())
        assert np.int64(probe[0]) in mine if truth else True
        assert "7" not in mine and 7.0 not in mine  # only integer labels
    finally:
        labelmap._FLOOR = floor


def test_dense_labels_stay_in_a_table() -> None:
    rows = LabelRows()
    rows.set_many(np.arange(1, 1_000_001, dtype=np.int64), np.arange(1_000_000))
    assert rows._dict is None and rows._table.nbytes <= 8_000_000
    rows[1_000_001] = 5
    assert rows[1_000_001] == 5 and len(rows) == 1_000_001
