"""Writing memories: validation, the encoding gate and the typed write-back calls."""
