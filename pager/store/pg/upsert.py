"""The SQL of a batch write: one upsert for the first occurrence of every dedup key, then one
reinforcing UPDATE per round of repeats (a key may be touched once per statement)."""

from __future__ import annotations

from collections.abc import Sequence

from mempager.store.pg.rows import MEMORY_COLUMNS
from mempager.types import NewMemory

Key = tuple[str, str, str]

UPSERT = f"""
WITH labels AS MATERIALIZED (
    SELECT nextval('memory_label_seq') AS label, g FROM generate_series(1, %(n)s::int) AS g
), input AS (
    SELECT l.label, x.* FROM unnest(%(id)s::text[], %(actor)s::text[], %(scope)s::text[], %(type)s::text[],
        %(text)s::text[], %(source)s::text[], %(confidence)s::float8[], %(importance)s::float8[],
        %(strength)s::float8[], %(created)s::timestamptz[], %(tags)s::text[], %(metadata)s::text[],
        %(chash)s::text[], %(dkey)s::text[]) WITH ORDINALITY AS x(id, actor, scope, type, text, source,
        confidence, importance, strength, created_at, tags, metadata, content_hash, dedup_key, n)
    JOIN labels l ON l.g = x.n
), ins AS (
    INSERT INTO memories (label, id, actor, scope, type, text, source, confidence, importance, strength,
        created_at, updated_at, last_accessed_at, written_at, access_count, tags, metadata, content_hash,
        dedup_key, rev)
    SELECT label, id, actor, scope, type, text, source, confidence, importance, strength,
        coalesce(created_at, %(now)s), %(now)s, %(now)s, %(now)s, 0,
        ARRAY(SELECT jsonb_array_elements_text(tags::jsonb)), metadata, content_hash, dedup_key,
        nextval('memory_rev_seq')
    FROM input ORDER BY actor, type, dedup_key  -- one lock order for every writer
    ON CONFLICT (actor, type, dedup_key) DO UPDATE SET
        strength = memories.strength + 0.1 * (1 - memories.strength),
        importance = greatest(memories.importance, excluded.importance),
        confidence = greatest(memories.confidence, excluded.confidence),
        access_count = memories.access_count + 1,
        last_accessed_at = excluded.updated_at, updated_at = excluded.updated_at
    RETURNING {MEMORY_COLUMNS}, dedup_key
), queued AS (
    INSERT INTO embed_queue (model, label, actor)
    SELECT m.model, ins.label, ins.actor FROM ins CROSS JOIN embed_models m WHERE ins.id = ANY(%(id)s)
)
SELECT * FROM ins
"""
BUMP = f"""
UPDATE memories m SET strength = m.strength + 0.1 * (1 - m.strength),
    importance = greatest(m.importance, x.importance), confidence = greatest(m.confidence, x.confidence),
    access_count = m.access_count + 1, last_accessed_at = %(now)s, updated_at = %(now)s
FROM unnest(%(actor)s::text[], %(type)s::text[], %(dkey)s::text[], %(importance)s::float8[],
    %(confidence)s::float8[]) AS x(actor, type, dedup_key, importance, confidence)
WHERE m.actor = x.actor AND m.type = x.type AND m.dedup_key = x.dedup_key
RETURNING {", ".join("m." + c.strip() for c in MEMORY_COLUMNS.split(","))}, m.dedup_key
"""


def plan(items: Sequence[NewMemory], keys: list[str]) -> tuple[dict[Key, int], list[list[int]]]:
    """First occurrence of each dedup key, and the repeats grouped in rounds (r-th repeat per key)."""
    firsts: dict[Key, int] = {}
    seen: dict[Key, int] = {}
    rounds: list[list[int]] = []
    for i, (item, key) in enumerate(zip(items, keys, strict=True)):
        k = (item.actor, item.type.value, key)
        n = seen.get(k, 0)
        if n == 0:
            firsts[k] = i
        else:
            if len(rounds) < n:
                rounds.append([])
            rounds[n - 1].append(i)
        seen[k] = n + 1
    return firsts, rounds
