"""Numbered schema migrations for the DuckDB store, each applied in one transaction.

Never edit a migration that has shipped; add the next number. A store whose newest applied
migration is beyond the last one here was written by a newer mempager and is refused.
"""

from __future__ import annotations

from typing import Any

from mempager.errors import SchemaTooNew

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "memories, vectors, embedding failures, store meta",
        """
        CREATE SEQUENCE memory_label_seq START 1;
        CREATE SEQUENCE memory_rev_seq START 1;
        CREATE SEQUENCE vector_seq START 1;
        CREATE TABLE store_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
        CREATE TABLE memories (
            label BIGINT PRIMARY KEY,
            id VARCHAR NOT NULL,
            actor VARCHAR NOT NULL,
            scope VARCHAR NOT NULL,
            type VARCHAR NOT NULL,
            text VARCHAR NOT NULL,
            source VARCHAR NOT NULL,
            confidence DOUBLE NOT NULL,
            importance DOUBLE NOT NULL,
            strength DOUBLE NOT NULL,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            last_accessed_at TIMESTAMP NOT NULL,
            written_at TIMESTAMP NOT NULL,
            access_count INTEGER NOT NULL,
            tags VARCHAR[] NOT NULL,
            metadata VARCHAR NOT NULL,
            content_hash VARCHAR NOT NULL,
            dedup_key VARCHAR NOT NULL,
            superseded_by VARCHAR,
            valid_until TIMESTAMP,
            rev BIGINT NOT NULL
        );
        CREATE INDEX memories_id ON memories (id);
        CREATE INDEX memories_dedup ON memories (dedup_key);
        CREATE TABLE vectors (
            label BIGINT NOT NULL,
            model VARCHAR NOT NULL,
            dim INTEGER NOT NULL,
            content_hash VARCHAR NOT NULL,
            vec BLOB NOT NULL,
            seq BIGINT NOT NULL,
            PRIMARY KEY (label, model)
        );
        CREATE TABLE embed_failures (
            label BIGINT NOT NULL,
            model VARCHAR NOT NULL,
            attempts INTEGER NOT NULL,
            last_error VARCHAR NOT NULL,
            last_at TIMESTAMP NOT NULL,
            PRIMARY KEY (label, model)
        );
        """,
    ),
    (
        2,
        "page injections per turn, feedback log, review queue",
        """
        CREATE TABLE injections (
            actor VARCHAR NOT NULL,
            turn VARCHAR NOT NULL,
            uri VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            recorded_at TIMESTAMP NOT NULL,
            PRIMARY KEY (actor, turn, uri)
        );
        CREATE TABLE feedback_log (
            actor VARCHAR NOT NULL,
            turn VARCHAR NOT NULL,
            outcome VARCHAR NOT NULL,
            recorded_at TIMESTAMP NOT NULL,
            PRIMARY KEY (actor, turn)
        );
        CREATE TABLE review_queue (
            id VARCHAR PRIMARY KEY,
            actor VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            payload VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL,
            decided_at TIMESTAMP,
            result_uri VARCHAR
        );
        """,
    ),
    (
        3,
        "hash-chained audit trail",
        """
        CREATE TABLE audit (
            seq BIGINT PRIMARY KEY,
            recorded_at TIMESTAMP NOT NULL,
            actor VARCHAR NOT NULL,
            op VARCHAR NOT NULL,
            uri VARCHAR NOT NULL,
            content_hash VARCHAR NOT NULL,
            prev_hash VARCHAR NOT NULL,
            hash VARCHAR NOT NULL
        );
        """,
    ),
    (
        4,
        "consolidation: session wraps, continuity versions, pattern history, associations, sessions",
        """
        CREATE TABLE consolidation_state (
            actor VARCHAR PRIMARY KEY,
            section_schema VARCHAR,
            citations_seen BOOLEAN NOT NULL,
            last_label BIGINT NOT NULL,
            wraps INTEGER NOT NULL,
            baton VARCHAR
        );
        CREATE TABLE wraps (
            actor VARCHAR NOT NULL,
            number INTEGER NOT NULL,
            status VARCHAR NOT NULL,
            opened_at TIMESTAMP NOT NULL,
            saved_at TIMESTAMP,
            labels BIGINT[] NOT NULL,
            session_id VARCHAR,
            metrics VARCHAR NOT NULL,
            PRIMARY KEY (actor, number)
        );
        CREATE TABLE continuity (
            actor VARCHAR NOT NULL,
            version INTEGER NOT NULL,
            wrap INTEGER NOT NULL,
            text VARCHAR NOT NULL,
            saved_at TIMESTAMP NOT NULL,
            PRIMARY KEY (actor, version)
        );
        CREATE TABLE pattern_history (
            actor VARCHAR NOT NULL,
            key VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            level INTEGER NOT NULL,
            max_level INTEGER NOT NULL,
            grounded_on DATE,
            explanations VARCHAR NOT NULL,
            in_continuity BOOLEAN NOT NULL,
            PRIMARY KEY (actor, key)
        );
        CREATE TABLE associations (
            actor VARCHAR NOT NULL,
            a BIGINT NOT NULL,
            b BIGINT NOT NULL,
            strength DOUBLE NOT NULL,
            last_wrap INTEGER NOT NULL,
            affect_tag VARCHAR,
            affect_intensity DOUBLE,
            PRIMARY KEY (actor, a, b)
        );
        CREATE TABLE wrap_sessions (
            actor VARCHAR NOT NULL,
            session_id VARCHAR NOT NULL,
            seen_at TIMESTAMP NOT NULL,
            PRIMARY KEY (actor, session_id)
        );
        """,
    ),
    (
        5,
        "consolidation lock: one LLM consolidation step per store at a time",
        """
        CREATE TABLE consolidation_locks (
            name VARCHAR PRIMARY KEY,
            holder VARCHAR NOT NULL,
            acquired_at TIMESTAMP NOT NULL,
            expires_at TIMESTAMP NOT NULL
        );
        """,
    ),
    (
        6,
        "the crystallized tier and spores (prospective memory)",
        """
        CREATE TABLE crystals (
            actor VARCHAR NOT NULL,
            id VARCHAR NOT NULL,
            key VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            body VARCHAR NOT NULL,
            evidence VARCHAR NOT NULL,
            source VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (actor, id)
        );
        CREATE TABLE spores (
            actor VARCHAR NOT NULL,
            id VARCHAR NOT NULL,
            text VARCHAR NOT NULL,
            cue VARCHAR,
            due_at TIMESTAMP,
            status VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL,
            done_at TIMESTAMP,
            PRIMARY KEY (actor, id)
        );
        """,
    ),
)

LATEST = MIGRATIONS[-1][0]


def _applied(con: Any) -> int:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'"
    ).fetchone()[0]
    if not exists:
        con.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
            " applied_at TIMESTAMP NOT NULL DEFAULT now())"
        )
        return 0
    row = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(row[0])


def migrate(con: Any, location: str) -> int:
    """Apply every pending migration; returns the schema version now in force."""
    current = _applied(con)
    if current > LATEST:
        raise SchemaTooNew(
            f"{location} has schema version {current}, this mempager knows up to {LATEST}; "
            "upgrade mempager (pip install -U mempager) to open it"
        )
    for version, name, sql in MIGRATIONS:
        if version <= current:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [version, name])
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        current = version
    return current
