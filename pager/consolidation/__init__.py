"""Consolidation (seed 003): session wraps, the always-loaded continuity, the immune system that
decides which patterns graduate, and the associations formed by co-citation."""

from mempager.consolidation.associations import Affect
from mempager.consolidation.report import Episode, PatternChange, SaveResult, Wrap
from mempager.consolidation.schema import DEFAULT_SCHEMA, PARTNERSHIP_SCHEMA, SectionSchema, SectionSpec

__all__ = [
    "DEFAULT_SCHEMA",
    "PARTNERSHIP_SCHEMA",
    "Affect",
    "Episode",
    "PatternChange",
    "SaveResult",
    "SectionSchema",
    "SectionSpec",
    "Wrap",
]
