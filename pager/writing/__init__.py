"""Writing memories: validation, the encoding gate, the typed write-back calls and in-place edits."""
