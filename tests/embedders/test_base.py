"""The shared output guard, the timed runner and the boot probe."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mempager.embedders import check_vectors
from mempager.embedders.base import check_texts, probe, run_with_timeout
from mempager.embedders.errors import EmbedderBadResponse, EmbedderTimeout
from mempager.errors import DimensionMismatch, InvalidInput, NonFiniteVector
from mempager.types import FloatMatrix, Role

finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False)


@settings(database=None, max_examples=200, deadline=None)  # database=None: nothing written to the tree
@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 12)), elements=finite))
def test_any_finite_nonzero_matrix_becomes_unit_float32_rows(matrix: np.ndarray) -> None:
    if (np.abs(matrix).max(axis=1) == 0).any():
        with pytest.raises(EmbedderBadResponse, match="all-zero"):
            check_vectors(matrix, matrix.shape[0], matrix.shape[1], "test")
        return
    out = check_vectors(matrix, matrix.shape[0], matrix.shape[1], "test")
    assert out.dtype == np.float32 and out.flags.c_contiguous
    assert np.isfinite(out).all()
    np.testing.assert_allclose(np.linalg.norm(out.astype(np.float64), axis=1), 1.0, atol=1e-6)
    directions = matrix / np.abs(matrix).max(axis=1, keepdims=True)
    cosine = (out * directions).sum(axis=1) / np.linalg.norm(directions, axis=1)
    np.testing.assert_allclose(cosine, 1.0, atol=1e-5)  # same direction, only the length changed


def test_extreme_but_finite_values_do_not_overflow_or_underflow() -> None:
    out = check_vectors([[1e308, 1e308], [1e-320, 0.0]], 2, 2, "test")
    np.testing.assert_allclose(out, [[2**-0.5, 2**-0.5], [1.0, 0.0]], atol=1e-7)


def test_rejections_name_the_embedder() -> None:
    with pytest.raises(NonFiniteVector, match=r"who.*rows \[1\]"):
        check_vectors([[1.0, 0.0], [np.nan, 1.0]], 2, 2, "who")
    with pytest.raises(DimensionMismatch, match="dimension 3, expected 2"):
        check_vectors(np.ones((2, 3)), 2, 2, "who")
    with pytest.raises(EmbedderBadResponse, match="1 vectors for 2 texts"):
        check_vectors(np.ones((1, 2)), 2, 2, "who")
    with pytest.raises(EmbedderBadResponse, match="shape"):
        check_vectors(np.ones(2), 1, 2, "who")
    with pytest.raises(EmbedderBadResponse, match="not arrays of numbers"):
        check_vectors([["a", "b"]], 1, 2, "who")
    assert check_vectors([], 0, 4, "who").shape == (0, 4)


def test_check_texts() -> None:
    assert check_texts(("a", "b")) == ["a", "b"]
    with pytest.raises(InvalidInput, match="not one string"):
        check_texts("abc")
    with pytest.raises(InvalidInput, match=r"texts\[1\]"):
        check_texts(["a", 2])  # type: ignore[list-item]


def test_run_with_timeout_returns_raises_or_gives_up() -> None:
    assert run_with_timeout(lambda: 42, 5.0, "quick") == 42
    with pytest.raises(ZeroDivisionError):
        run_with_timeout(lambda: 1 // 0, 5.0, "broken")
    with pytest.raises(EmbedderTimeout, match="slow thing did not finish within 0.05s"):
        run_with_timeout(lambda: time.sleep(2.0), 0.05, "slow thing")


class Unnormalised:
    """A real (if buggy) embedder: right shape, finite, but rows not of unit length."""

    name = "buggy-v1"
    dim = 4

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        return np.full((len(texts), 4), 3.0, dtype=np.float32)


class WrongWidth(Unnormalised):
    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        return np.full((len(texts), 5), 0.5, dtype=np.float32)


def test_probe_catches_what_a_buggy_embedder_returns() -> None:
    with pytest.raises(EmbedderBadResponse, match="not L2-normalised"):
        probe(Unnormalised(), 5.0)
    with pytest.raises(DimensionMismatch):
        probe(WrongWidth(), 5.0)
