"""Types of the compiled BM25 kernel (index/_bm25.c)."""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_Term = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]

class Kernel:
    def __init__(self, prune_from: int = 262144) -> None: ...
    def spread(
        self,
        terms: Sequence[_Term],
        alive: npt.NDArray[np.bool_],
        row_label: npt.NDArray[np.int64],
        member: npt.NDArray[np.bool_],
        prev: npt.NDArray[np.int64],
        next: npt.NDArray[np.int64],
        block_weights: Sequence[float],
        /,
    ) -> list[int]: ...
    def context(
        self,
        idf: Sequence[float],
        k1: float,
        b_used: bool,
        scale: float,
        base: float,
        doclen: npt.NDArray[np.float64],
        key_length: npt.NDArray[np.float64],
        /,
    ) -> bytes: ...
    def plain(
        self,
        terms: Sequence[_Term],
        weights: Sequence[float],
        k1: float,
        b_used: bool,
        scale: float,
        base: float,
        doclen: npt.NDArray[np.float64],
        alive: npt.NDArray[np.bool_],
        row_label: npt.NDArray[np.int64],
        context_rows: npt.NDArray[np.int64],
        k: int,
        /,
    ) -> list[tuple[int, float]]: ...
    def lookup(
        self,
        rows: npt.NDArray[np.int64],
        terms: Sequence[_Term],
        weights: Sequence[float],
        k1: float,
        b_used: bool,
        scale: float,
        base: float,
        doclen: npt.NDArray[np.float64],
        /,
    ) -> list[float]: ...
