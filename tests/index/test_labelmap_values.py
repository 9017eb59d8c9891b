"""LabelRows with int64 values: the semantic lane keeps a 60-bit content-hash digest per label in one."""

from __future__ import annotations

import numpy as np

from mempager.index.labelmap import LabelRows


def test_label_rows_hold_int64_values() -> None:
    rows = LabelRows(np.int64)
    rows.set_many(np.array([7, 9]), np.array([2**60 - 1, 0]))
    assert rows.get(7) == 2**60 - 1 and rows.get(9) == 0 and rows.get(8) is None
    assert rows.rows_of(np.array([9, 7, 1])).tolist() == [0, 2**60 - 1, -1]
    assert rows.pop(7) == 2**60 - 1 and 7 not in rows and len(rows) == 1


def test_sparse_int64_values_survive_the_switch_to_a_dict() -> None:
    rows = LabelRows(np.int64)
    rows.set_many(np.array([1]), np.array([2**59]))
    rows.set_many(np.array([10**12]), np.array([5]))  # far apart: the table turns into a dict
    assert rows.get(1) == 2**59 and rows.get(10**12) == 5
