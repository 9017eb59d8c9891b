"""Types of the compiled score fusion (lanes/_fuse.c)."""

def fuse(
    lanes: list[list[tuple[int, float]]],
    completions: list[dict[int, float] | None],
    weights: list[float],
    semantic: int,
    floor: float,
    lexical: int,
    unembedded: dict[int, float] | None,
    w_semantic: float,
    /,
) -> tuple[bytearray, bytearray, bytearray, bytearray, bytearray, bytearray] | None: ...
