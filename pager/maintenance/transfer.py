"""Moving memories between stores: export as JSON lines, import them back, back up a store file.

``Transfer`` is the pager's collaborator for ``export``, ``import_memories`` and ``backup``; the
line format is ``transfer_format`` and the file copy is ``backup``.

Import writes into the pager's actor (``keep_actor=True``: the actor each line names) and is
idempotent: a memory the store already holds (the store's own dedup rule: same actor, type and
normalised words, an event also at the same time) is skipped, never reinforced, so importing a
file twice adds nothing the second time. Every line is validated before anything is written.
Then the memories are written in batches (``put_many``), with their vectors when the file has
them (stored under the memory's content hash, so they need no re-embedding), and a second pass
restores what a write cannot set (``store.update``, audited as ``import``).

What is kept: text, type, scope, source, confidence, importance, strength, tags, metadata and
``created_at`` (written with the memory); ``access_count`` and ``last_accessed_at`` of a memory
that was accessed, ``superseded_by`` and ``valid_until`` (restored after the write); vectors.
What is new: ``id`` and ``uri`` (the stores assign them), so a reference to another memory of the
same file (``superseded_by``, and any metadata string that is such a uri: ``derived_from``,
``inverted_from``, ``intent_ref``) is rewritten to that memory's uri here; ``updated_at``, and
``last_accessed_at`` of a memory never accessed, are the time of the import (the stores set them on
every write and offer no way to set them). Not exported: the review queue, page injections and
the audit trail (the audit trail of the target records the import itself). An import restores
memories as they were: it does not pass them through the encoding gate (copilot review) again.

Crystals and spores (``transfer_tiers``) go with the memories, after them: each keeps its id,
times, status and completion time, and a crystal's evidence follows its memories to their new
uris. They are written in one transaction after the memories, for the actor each belongs to (as
memories are), skipping what the actor holds already (a crystal of the same id or pattern, a
spore of the same id), audited as ``import``.

A write that fails half way (the disk, the server) leaves the batches before it stored; running
the same import again completes it, as everything already there is skipped.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import numpy as np

from mempager.clock import utc_now
from mempager.errors import EmbedderError, InvalidInput
from mempager.maintenance.backup import backup_store
from mempager.maintenance.transfer_format import (
    ImportedLine,
    InvalidImportLine,
    LineReader,
    dumps,
    header_record,
    lookup_keys,
    memory_record,
    possible_keys,
    remap,
)
from mempager.maintenance.transfer_tiers import TierReader, crystal_record, import_tiers, spore_record
from mempager.protocols import SemanticLaneLike, Store
from mempager.store.tier_types import tiers_of
from mempager.types import FloatMatrix, Memory, NewMemory
from mempager.writing.build import MemoryBuilder

_ALL = 2**62  # "no limit" for the store's paged reads
Target = str | Path | IO[str] | IO[bytes]
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ImportReport:
    read: int  # memory lines in the file
    added: int  # memories written
    skipped: int  # already in the store (or repeated in the file): nothing written for them
    vectors: int  # vectors stored, every model counted
    restored: int  # memories given back access counts, supersession, expiry or references after the write
    crystals: int = 0  # crystals written (transfer_tiers)
    spores: int = 0  # spores written
    tiers_skipped: int = 0  # crystals and spores already there (or repeated in the file)
    evidence_dropped: int = 0  # crystal evidence whose memory is nowhere in this store


class Transfer:
    def __init__(
        self,
        store: Store,
        actor: str,
        *,
        build: MemoryBuilder,
        semantic: SemanticLaneLike,
        batch_size: int = 500,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.store = store
        self.actor = actor
        self.build = build
        self.semantic = semantic  # the active model's lane: imported vectors of it are indexed at once
        self.batch_size = batch_size
        self.clock = clock  # the created_at of a hand-written crystal or spore line without one

    # -- export ---------------------------------------------------------------------------------
    def export(self, target: Target, *, vectors: bool = False) -> int:
        """Write this actor's memories to ``target`` (a path, or an open text or binary stream) as
        ``mempager.export.v1`` JSON lines, oldest first (``created_at``, then ``id``), then its
        crystals and spores. With ``vectors``, every stored vector of every model goes with its
        memory. Returns the count of memories."""
        memories = sorted(self.store.query(self.actor, limit=_ALL, order="oldest"), key=lambda m: (m.created_at, m.id))
        per_label: dict[int, dict[str, FloatMatrix]] = {}
        models: dict[str, int] | None = None
        if vectors:
            models = {}
            for model in sorted(self.store.vector_models(self.actor)):
                labels, matrix = self.store.vectors(self.actor, model)
                if len(labels):
                    models[model] = int(matrix.shape[1])
                    for label, row in zip(labels.tolist(), matrix, strict=True):
                        per_label.setdefault(label, {})[model] = row
        tiers = tiers_of(self.store)
        crystals, spores = tiers.crystals(self.actor), tiers.spores(self.actor)  # oldest first, every status
        kinds = {"crystal": len(crystals), "spore": len(spores)}
        header = header_record(self.store.location, self.actor, len(memories), models, kinds)
        lines = (dumps(memory_record(m, per_label.get(m.label, {}) if vectors else None)) for m in memories)
        uris = {m.id: m.uri for m in memories}
        rest = [dumps(crystal_record(c, uris)) for c in crystals] + [dumps(spore_record(s)) for s in spores]
        _write(target, [dumps(header)], lines, rest)
        return len(memories)

    # -- import ---------------------------------------------------------------------------------
    def import_memories(
        self, source: Target, *, keep_actor: bool = False, progress: Progress | None = None
    ) -> ImportReport:
        """Write the memories of an export (a path, or an open stream) into this store; see the module."""
        tier_reader = TierReader(self.actor, keep_actor, self.clock)
        reader = LineReader(self.build, self.actor, keep_actor=keep_actor, kinds=tier_reader.handlers())
        lines = reader.read(_read_lines(source))
        self._check_dims(reader.dims, {line.item.actor for line in lines})
        tiers = tiers_of(self.store)  # before any write: a store without them refuses the file whole
        fresh, resolved, repeats = self._plan(lines)
        old_uris = {line.old_uri for line in lines if line.old_uri}
        later = [line for line in fresh if _needs_restore(line, old_uris)]
        total, done, added, skipped, stored = len(fresh) + len(later), 0, 0, len(lines) - len(fresh), 0
        vectors = [(line, found) for line, found in resolved.values() if line.vectors]  # existing memories
        stored += self._put_vectors(self._missing(vectors))
        written: dict[int, Memory] = {}
        if progress is not None and total:
            progress(0, total)
        for batch in _chunks(fresh, self.batch_size):
            results = self.store.put_many([line.item for line in batch])
            pairs = []
            for line, result in zip(batch, results, strict=True):
                written[line.line] = result.memory
                if result.created:
                    added += 1
                    pairs.append((line, result.memory))
                else:  # another writer stored it meanwhile: it is theirs, leave it be
                    skipped += 1
            stored += self._put_vectors(pairs)
            done += len(batch)
            if progress is not None:
                progress(done, total)
        here = self._memory_map(lines, written, resolved, repeats)
        uris = {old: memory.uri for old, memory in here.items()}
        restored = 0
        for line in later:
            memory = written[line.line]
            changes = _restore(line, memory, uris)
            if changes:
                self.store.update(memory.actor, memory.id, op="import", **changes)
                restored += 1
            done += 1
            if progress is not None:
                progress(done, total)
        # After the memories (and their restore pass): a crystal's evidence needs them where they are now.
        t = import_tiers(self.store, tiers, tier_reader, here)
        return ImportReport(
            read=len(lines),
            added=added,
            skipped=skipped,
            vectors=stored,
            restored=restored,
            crystals=t.crystals,
            spores=t.spores,
            tiers_skipped=t.skipped,
            evidence_dropped=t.evidence_dropped,
        )

    def _plan(
        self, lines: Sequence[ImportedLine]
    ) -> tuple[list[ImportedLine], dict[int, tuple[ImportedLine, Memory]], dict[int, int]]:
        """(lines to write, lines the store already holds -> that memory, repeated line -> first line).

        A memory is already there when a stored memory of the actor may carry a key the line's
        memory would be stored under (``lookup_keys``): its actual key is among its possible keys,
        so a line that matches none can never reinforce a stored memory when it is written.
        """
        fresh: list[ImportedLine] = []
        resolved: dict[int, tuple[ImportedLine, Memory]] = {}
        repeats: dict[int, int] = {}
        first: dict[tuple[str, str, str], int] = {}
        known: dict[str, dict[tuple[str, str], list[Memory]]] = {}
        for line in lines:
            item = line.item
            assert item.dedup_key is not None  # set by the reader
            key = (item.actor, item.type.value, item.dedup_key)
            if key in first:
                repeats[line.line] = first[key]
                continue
            first[key] = line.line
            if item.actor not in known:
                known[item.actor] = self._possible_keys(item.actor)
            found = self._find(item, known[item.actor])
            if found is not None:
                resolved[line.line] = (line, found)
            else:
                fresh.append(line)
        return fresh, resolved, repeats

    @staticmethod
    def _find(item: NewMemory, known: Mapping[tuple[str, str], list[Memory]]) -> Memory | None:
        for key, created in lookup_keys(item):
            for memory in known.get((item.type.value, key), ()):
                if created is None or memory.created_at == created:
                    return memory
        return None

    def _possible_keys(self, actor: str) -> dict[tuple[str, str], list[Memory]]:
        """(type, key) -> the actor's stored memories that may carry that dedup key, oldest first."""
        index: dict[tuple[str, str], list[Memory]] = {}
        for memory in self.store.query(actor, limit=_ALL, order="oldest"):
            for key in possible_keys(memory):
                index.setdefault((memory.type.value, key), []).append(memory)
        return index

    def _check_dims(self, dims: Mapping[str, tuple[int, int]], actors: Iterable[str]) -> None:
        """Refuse, before writing, vectors whose width differs from the model's in this store."""
        for model, (dim, line) in dims.items():
            have: int | None = None
            if model == self.semantic.model:
                try:
                    have = int(self.semantic.embedder.dim)
                except EmbedderError:
                    have = None  # a forced embedder that is down: the store's vectors still say
            for actor in [] if have is not None else actors:
                count, seq = self.store.vector_state(actor, model)
                if count:
                    _, last = self.store.vectors_since(actor, model, seq - 1)
                    if len(last):
                        have = int(last.shape[1])
                        break
            if have is not None and have != dim:
                raise InvalidImportLine(line, f"vectors of {model!r} are {dim}-d, this store's are {have}-d")

    def _missing(self, existing: Sequence[tuple[ImportedLine, Memory]]) -> list[tuple[ImportedLine, Memory]]:
        """Existing memories that lack a vector the file has for them (an interrupted import)."""
        if not existing:
            return []
        have: dict[tuple[str, str], set[int]] = {}
        out = []
        for line, memory in existing:
            if _same_words(line, memory):
                wanted = {}
                for model, vec in line.vectors.items():
                    if (memory.actor, model) not in have:
                        have[(memory.actor, model)] = set(self.store.vector_labels(memory.actor, model).tolist())
                    if memory.label not in have[(memory.actor, model)]:
                        wanted[model] = vec
                if wanted:
                    out.append((ImportedLine(line.line, line.item, None, 0, None, None, None, wanted), memory))
        return out

    def _put_vectors(self, pairs: Sequence[tuple[ImportedLine, Memory]]) -> int:
        """Store each line's vectors for the memory written from it; the active model's are indexed too."""
        by_model: dict[str, list[tuple[Memory, FloatMatrix]]] = {}
        for line, memory in pairs:
            for model, vec in line.vectors.items():
                by_model.setdefault(model, []).append((memory, vec))
        stored = 0
        for model, rows in sorted(by_model.items()):
            labels = np.array([m.label for m, _ in rows], dtype=np.int64)
            matrix = np.stack([vec for _, vec in rows]).astype(np.float32, copy=False)
            hashes = [m.content_hash for m, _ in rows]
            with self.semantic.lock:  # as the workers do: a forget cannot slip between store and lane
                kept = self.store.put_vectors(model, labels, matrix, hashes)
                stored += len(kept)
                if model == self.semantic.model:
                    own = np.isin(labels, kept) & np.array([m.actor == self.actor for m, _ in rows], dtype=bool)
                    idx = np.flatnonzero(own)
                    if len(idx):
                        self.semantic.add(labels[idx], matrix[idx], [hashes[i] for i in idx.tolist()])
        return stored

    @staticmethod
    def _memory_map(
        lines: Sequence[ImportedLine],
        written: Mapping[int, Memory],
        resolved: Mapping[int, tuple[ImportedLine, Memory]],
        repeats: Mapping[int, int],
    ) -> dict[str, Memory]:
        """Old uri (where the file came from) -> that memory in this store."""
        here: dict[int, Memory] = dict(written)
        here.update((n, m) for n, (_, m) in resolved.items())
        here.update((n, here[first]) for n, first in repeats.items() if first in here)
        return {line.old_uri: here[line.line] for line in lines if line.old_uri and line.line in here}

    # -- backup ---------------------------------------------------------------------------------
    def backup(self, dest: str | Path) -> Path:
        """A consistent copy of the store file at ``dest``, taken while it is in use (see ``backup``)."""
        return backup_store(self.store, dest)


def _same_words(line: ImportedLine, memory: Memory) -> bool:
    return memory.text == line.item.text  # a vector describes exact words: reworded ones need their own


def _needs_restore(line: ImportedLine, old_uris: set[str]) -> bool:
    return bool(
        line.access_count
        or line.superseded_by
        or line.valid_until is not None
        or (line.item.metadata and _mentions(line.item.metadata, old_uris))
    )


def _mentions(value: Any, uris: set[str]) -> bool:
    if isinstance(value, str):
        return value in uris
    if isinstance(value, Mapping):
        return any(_mentions(v, uris) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_mentions(v, uris) for v in value)
    return False


def _restore(line: ImportedLine, memory: Memory, uris: Mapping[str, str]) -> dict[str, Any]:
    """The fields ``store.update`` can set that the write could not."""
    changes: dict[str, Any] = {}
    if line.access_count:
        changes["access_count"] = line.access_count
        if line.last_accessed_at is not None:
            changes["last_accessed_at"] = line.last_accessed_at
    if line.superseded_by:
        changes["superseded_by"] = uris.get(line.superseded_by, line.superseded_by)
    if line.valid_until is not None:
        changes["valid_until"] = line.valid_until
    metadata = remap(dict(memory.metadata), uris)
    if metadata != dict(memory.metadata):
        changes["metadata"] = metadata
    return changes


def _chunks(items: Sequence[ImportedLine], size: int) -> Iterator[Sequence[ImportedLine]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _read_lines(source: Target) -> list[str]:
    """The lines of ``source``, split on ``\\n`` only (a text may hold U+2028, which JSON keeps raw)."""
    try:
        if isinstance(source, (str, Path)):
            data: str | bytes = Path(source).expanduser().read_bytes()
        else:
            data = source.read()
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the import is not UTF-8 text (byte {exc.start}); nothing was imported") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {source}: {exc.strerror or exc}; nothing was imported") from None
    return text.split("\n")


def _write(target: Target, *parts: Iterable[str]) -> None:
    """Every line of ``parts`` to ``target``: a path is written whole or not at all (temp file, rename)."""
    if isinstance(target, (str, Path)):
        path = Path(target).expanduser()
        partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
        try:
            with open(partial, "w", encoding="utf-8", newline="\n") as out:
                for part in parts:
                    for line in part:
                        out.write(line + "\n")
            os.replace(partial, path)
        except OSError as exc:
            raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from None
        finally:
            partial.unlink(missing_ok=True)
        return
    binary = isinstance(target, (io.RawIOBase, io.BufferedIOBase)) or "b" in getattr(target, "mode", "")
    for part in parts:
        for line in part:
            target.write((line + "\n").encode("utf-8") if binary else line + "\n")  # type: ignore[arg-type]
