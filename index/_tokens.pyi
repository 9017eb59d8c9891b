"""Types of the compiled raw-token scan and unit lookup (index/_tokens.c)."""

import numpy as np
import numpy.typing as npt

def ascii_raw_tokens(text: str, /) -> list[str] | None: ...
def unit_ids(
    docs: list[list[str]], unit_of: dict[str, int], out: npt.NDArray[np.int64], only_missing: bool, /
) -> list[str]: ...
