"""Types of the compiled positional row reads (index/_rows.c)."""

import numpy as np
import numpy.typing as npt

def pread_rows(fd: int, out: npt.NDArray[np.float32], offsets: npt.NDArray[np.int64], width: int, /) -> int: ...
