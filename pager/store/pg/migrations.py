"""Numbered schema migrations for the PostgreSQL store, applied once under an advisory lock.

Every opener takes the same transaction-scoped advisory lock before it looks at the schema
version, so when many processes start at once exactly one applies each migration and the others
find it done. DDL is transactional in PostgreSQL: a failed migration leaves nothing behind.
A schema whose newest applied migration is beyond the last one here was written by a newer
mempager and is refused. Never edit a shipped migration; add the next number.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from mempager.errors import SchemaTooNew
from mempager.store.audit import GENESIS

# One lock for every mempager schema in a database: CREATE EXTENSION is per database.
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('mempager.migrate'))"

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "memories, embedding models, vectors, embedding queue, store meta",
        """
        CREATE SEQUENCE memory_label_seq;
        CREATE SEQUENCE memory_rev_seq;
        CREATE SEQUENCE vector_seq;
        CREATE TABLE store_meta (key text PRIMARY KEY, value text NOT NULL);
        CREATE TABLE memories (
            label bigint PRIMARY KEY,
            id text NOT NULL,
            actor text NOT NULL,
            scope text NOT NULL,
            type text NOT NULL,
            text text NOT NULL,
            source text NOT NULL,
            confidence double precision NOT NULL,
            importance double precision NOT NULL,
            strength double precision NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            last_accessed_at timestamptz NOT NULL,
            written_at timestamptz NOT NULL,
            access_count integer NOT NULL,
            tags text[] NOT NULL,
            metadata text NOT NULL,
            content_hash text NOT NULL,
            dedup_key text NOT NULL,
            superseded_by text,
            valid_until timestamptz,
            rev bigint NOT NULL,
            CONSTRAINT memories_dedup UNIQUE (actor, type, dedup_key)
        );
        CREATE INDEX memories_actor_id ON memories (actor, id);
        CREATE INDEX memories_actor_created ON memories (actor, created_at, label);
        CREATE INDEX memories_actor_rev ON memories (actor, rev);
        CREATE TABLE embed_models (
            model text PRIMARY KEY,
            dim integer,
            index_name text,
            registered_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE vectors (
            label bigint NOT NULL REFERENCES memories (label) ON DELETE CASCADE,
            model text NOT NULL,
            actor text NOT NULL,
            dim integer NOT NULL,
            content_hash text NOT NULL,
            vec vector NOT NULL,
            seq bigint NOT NULL DEFAULT nextval('vector_seq'),
            PRIMARY KEY (label, model)
        );
        CREATE INDEX vectors_actor_model ON vectors (actor, model, label);
        ALTER TABLE vectors ALTER COLUMN vec SET STATISTICS 0;  -- ANALYZE samples rows, skips the vectors
        CREATE TABLE embed_queue (
            model text NOT NULL REFERENCES embed_models (model) ON DELETE CASCADE,
            label bigint NOT NULL REFERENCES memories (label) ON DELETE CASCADE,
            actor text NOT NULL,
            attempts integer NOT NULL DEFAULT 0,
            last_error text,
            last_at timestamptz,
            claimed_by text,
            claimed_until timestamptz,
            PRIMARY KEY (model, label)
        );
        CREATE INDEX embed_queue_next ON embed_queue (model, actor, attempts, label);
        CREATE INDEX embed_queue_label ON embed_queue (label);
        -- every job is inserted then deleted: vacuum after a few hundred, not after 20% of a tiny table
        ALTER TABLE embed_queue SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500);
        """,
    ),
    (
        2,
        "page injections per turn, feedback log, review queue",
        """
        CREATE TABLE injections (
            actor text NOT NULL,
            turn text NOT NULL,
            uri text NOT NULL,
            kind text NOT NULL,
            recorded_at timestamptz NOT NULL,
            PRIMARY KEY (actor, turn, uri)
        );
        CREATE TABLE feedback_log (
            actor text NOT NULL,
            turn text NOT NULL,
            outcome text NOT NULL,
            recorded_at timestamptz NOT NULL,
            PRIMARY KEY (actor, turn)
        );
        CREATE TABLE review_queue (
            id text PRIMARY KEY,
            actor text NOT NULL,
            kind text NOT NULL,
            payload text NOT NULL,
            status text NOT NULL,
            created_at timestamptz NOT NULL,
            decided_at timestamptz,
            result_uri text
        );
        CREATE INDEX review_queue_actor ON review_queue (actor, status, created_at);
        """,
    ),
    (
        3,
        "hash-chained audit trail; its tail row serialises appends, so seq order is commit order",
        f"""
        CREATE TABLE audit (
            seq bigint PRIMARY KEY,
            recorded_at timestamptz NOT NULL,
            actor text NOT NULL,
            op text NOT NULL,
            uri text NOT NULL,
            content_hash text NOT NULL,
            prev_hash text NOT NULL,
            hash text NOT NULL,
            label bigint
        );
        CREATE INDEX audit_actor_seq ON audit (actor, seq);
        CREATE TABLE audit_tail (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            seq bigint NOT NULL,
            hash text NOT NULL
        );
        INSERT INTO audit_tail (seq, hash) VALUES (0, '{GENESIS}');
        """,
    ),
    (
        4,
        "consolidation: session wraps, continuity versions, pattern history, associations, sessions",
        """
        CREATE TABLE consolidation_state (
            actor text PRIMARY KEY,
            section_schema text,
            citations_seen boolean NOT NULL,
            last_label bigint NOT NULL,
            wraps integer NOT NULL,
            baton text
        );
        CREATE TABLE wraps (
            actor text NOT NULL,
            number integer NOT NULL,
            status text NOT NULL,
            opened_at timestamptz NOT NULL,
            saved_at timestamptz,
            labels bigint[] NOT NULL,
            session_id text,
            metrics text NOT NULL,
            PRIMARY KEY (actor, number)
        );
        -- one open wrap per actor, whichever process opens it
        CREATE UNIQUE INDEX wraps_one_open ON wraps (actor) WHERE status = 'open';
        CREATE TABLE continuity (
            actor text NOT NULL,
            version integer NOT NULL,
            wrap integer NOT NULL,
            text text NOT NULL,
            saved_at timestamptz NOT NULL,
            PRIMARY KEY (actor, version)
        );
        CREATE TABLE pattern_history (
            actor text NOT NULL,
            key text NOT NULL,
            name text NOT NULL,
            level integer NOT NULL,
            max_level integer NOT NULL,
            grounded_on date,
            explanations text NOT NULL,
            in_continuity boolean NOT NULL,
            PRIMARY KEY (actor, key)
        );
        -- a forgotten memory takes its links with it, also when another process forgets it
        CREATE TABLE associations (
            actor text NOT NULL,
            a bigint NOT NULL REFERENCES memories (label) ON DELETE CASCADE,
            b bigint NOT NULL REFERENCES memories (label) ON DELETE CASCADE,
            strength double precision NOT NULL,
            last_wrap integer NOT NULL,
            affect_tag text,
            affect_intensity double precision,
            PRIMARY KEY (actor, a, b)
        );
        CREATE INDEX associations_b ON associations (b);
        CREATE TABLE wrap_sessions (
            actor text NOT NULL,
            session_id text NOT NULL,
            seen_at timestamptz NOT NULL,
            PRIMARY KEY (actor, session_id)
        );
        """,
    ),
    (
        5,
        "consolidation lock: one LLM consolidation step per store at a time",
        """
        CREATE TABLE consolidation_locks (
            name text PRIMARY KEY,
            holder text NOT NULL,
            acquired_at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL
        );
        """,
    ),
    (
        6,
        "the crystallized tier and spores (prospective memory)",
        """
        CREATE TABLE crystals (
            actor text NOT NULL,
            id text NOT NULL,
            key text NOT NULL,
            name text NOT NULL,
            body text NOT NULL,
            evidence text NOT NULL,
            source text NOT NULL,
            created_at timestamptz NOT NULL,
            PRIMARY KEY (actor, id),
            UNIQUE (actor, key)
        );
        CREATE TABLE spores (
            actor text NOT NULL,
            id text NOT NULL,
            text text NOT NULL,
            cue text,
            due_at timestamptz,
            status text NOT NULL,
            created_at timestamptz NOT NULL,
            done_at timestamptz,
            PRIMARY KEY (actor, id)
        );
        CREATE INDEX spores_open ON spores (actor, status);
        """,
    ),
)

LATEST = MIGRATIONS[-1][0]


def applied_version(cur: Any, schema: str) -> int | None:
    """The schema's version, or None when it has no migration table yet."""
    table = cur.execute("SELECT to_regclass(%s)", [f"{schema}.schema_migrations"]).fetchone()[0]
    if table is None:
        return None
    query = sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(sql.Identifier(schema))
    return int(cur.execute(query).fetchone()[0])


def extension_schema(cur: Any) -> str | None:
    """Where pgvector's types live (public on most servers, ``extensions`` on some hosted ones)."""
    row = cur.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()
    return None if row is None else str(row[0])


def _refuse_newer(version: int | None, location: str) -> None:
    if version is not None and version > LATEST:
        raise SchemaTooNew(
            f"{location} has schema version {version}, this mempager knows up to {LATEST}; "
            "upgrade mempager (pip install -U 'mempager[postgres]') to open it"
        )


def migrate(conn: Any, schema: str, location: str) -> int:
    """Bring ``schema`` to LATEST (creating it and pgvector if needed); returns the version in force.

    ``conn`` is an autocommit connection; the search path is set inside the transaction.
    """
    version = applied_version(conn, schema)
    _refuse_newer(version, location)
    if version == LATEST:
        return LATEST  # the common case: no lock taken
    with conn.transaction():
        conn.execute(MIGRATION_LOCK)
        if extension_schema(conn) is None:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(
            sql.SQL("SET LOCAL search_path TO {}, {}").format(
                sql.Identifier(schema), sql.Identifier(extension_schema(conn) or "public")
            )
        )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        version = applied_version(conn, schema) or 0  # re-read under the lock: another opener may have won
        _refuse_newer(version, location)
        for number, name, ddl in MIGRATIONS:
            if number > version:
                conn.execute(ddl)
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", [number, name])
                version = number
        conn.execute(
            "INSERT INTO store_meta VALUES ('store_id', md5(random()::text || clock_timestamp()::text))"
            " ON CONFLICT DO NOTHING"
        )
    return version
