"""``mempager doctor``: the state of every file of a DuckDB store, and the safe recoveries.

``diagnose`` changes nothing. It reports the main file (empty? another kind of file? does DuckDB open
it alone and read every block of every table?), the write-ahead log (does every entry frame and check,
``store/damage.py``; does DuckDB replay it?), each saved index (manifest readable, every file it names
present and matching its checksums), the files an earlier recovery set aside, and the audit chain.
DuckDB is asked through a read-only connection to a link of the main file in a scratch directory (with
a copy of the WAL beside it, or none), so no probe can replay, truncate or checkpoint the real files.

``repair`` (holding the store's lock: never while a process has it open) does only what loses nothing
that could still be read: a damaged WAL is copied to ``<store>.wal.damaged-<time>`` and cut to its
intact entries (or moved there whole when DuckDB cannot replay it on the main file); a main file DuckDB
cannot open is moved to ``<store>.damaged-<time>`` with its WAL and indexes, so a new store starts at
the path; damaged indexes are removed and rebuilt from the store (``reopen``). A file of another kind
at the path is never touched, and the audit chain is evidence: reported, never rewritten.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb

from mempager.errors import IndexStale, NotAStore, StoreError, StoreLocked
from mempager.store import damage

BAD = frozenset({"damaged", "foreign", "in use"})


@dataclass(frozen=True, slots=True)
class Finding:
    part: str  # main | wal | index | audit | set aside
    path: str
    state: str  # ok | absent | damaged | foreign | in use | kept | unchecked
    detail: str


@dataclass(frozen=True, slots=True)
class DoctorReport:
    store: str
    findings: tuple[Finding, ...]
    actions: tuple[str, ...] = field(default=())

    @property
    def healthy(self) -> bool:
        return not any(f.state in BAD for f in self.findings)

    def of(self, part: str) -> list[Finding]:
        return [f for f in self.findings if f.part == part]

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "healthy": self.healthy,
            "findings": [asdict(f) for f in self.findings],
            "actions": list(self.actions),
        }


# -- diagnose ------------------------------------------------------------------------------------


def diagnose(path: Path) -> DoctorReport:
    path = Path(path)
    main = _main(path)
    findings = [main]
    wal = path.with_name(path.name + ".wal")
    findings.append(_wal(path, wal, main_ok=main.state == "ok"))
    findings += _indexes(path)
    findings += [
        Finding("set aside", str(p), "kept", "set aside by an earlier recovery; mempager never reads or deletes it")
        for p in damage.set_aside_files(path)
    ]
    if main.state == "ok" and findings[1].state in ("ok", "absent"):
        findings.append(_audit(path))
    else:
        findings.append(Finding("audit", str(path), "unchecked", "the store does not open: repair it first"))
    return DoctorReport(str(path), tuple(findings))


def _main(path: Path) -> Finding:
    if not path.exists():
        return Finding("main", str(path), "absent", "no store here yet: the first open creates it")
    refused = damage.main_problem(path)
    if isinstance(refused, NotAStore):
        return Finding("main", str(path), "foreign", str(refused))
    if refused is not None:
        return Finding("main", str(path), "damaged", str(refused))
    state, detail = _probe(path, None)
    if state == "ok":
        detail = f"DuckDB opens it alone and reads every block of every table ({detail})"
    return Finding("main", str(path), state, detail)


def _wal(path: Path, wal: Path, *, main_ok: bool) -> Finding:
    scan = damage.scan_wal(wal)
    if scan is None:
        return Finding("wal", str(wal), "absent", "no write-ahead log: everything is in the main file")
    if scan.damaged:
        return Finding(
            "wal",
            str(wal),
            "damaged",
            f"{scan.problem}; its first {scan.entries} entries ({scan.intact_to} of {scan.size} bytes) are intact. "
            f"--repair keeps the whole log in {wal.name}.damaged-<time> and replays the intact entries",
        )
    if not main_ok:
        return Finding("wal", str(wal), "unchecked", f"{scan.size} bytes; replay needs a readable main file")
    state, detail = _probe(path, wal)
    if state == "damaged":
        detail = f"DuckDB cannot replay it on this main file ({detail}); --repair sets it aside whole"
    elif state == "ok":
        detail = f"{scan.size} bytes, {scan.entries} entries; DuckDB replays it ({detail})"
    return Finding("wal", str(wal), state, detail)


@contextmanager
def _scratch(path: Path, wal: Path | None) -> Iterator[Path]:
    """A hard link to the main file in a scratch directory beside it, with a copy of ``wal`` (or no WAL).

    Not a symbolic link: DuckDB follows one and would replay the real WAL beside its target."""
    with tempfile.TemporaryDirectory(prefix=".mempager-doctor-", dir=path.parent) as tmp:
        link = Path(tmp) / "probe.duckdb"
        try:
            os.link(path, link)
        except OSError:  # a file system without hard links: a copy (read-only, so it stays as it was)
            shutil.copyfile(path, link)
        if wal is not None:
            shutil.copyfile(wal, Path(tmp) / "probe.duckdb.wal")
        yield link


def _probe(path: Path, wal: Path | None) -> tuple[str, str]:
    """("ok", what was read) or ("damaged" | "in use", DuckDB's reason), opening read-only in a scratch dir."""
    with _scratch(path, wal) as link:
        try:
            con = duckdb.connect(str(link), read_only=True)
        except duckdb.Error as exc:
            text = str(exc)
            if "lock" in text.lower():
                return "in use", f"another process has the store open ({text}); stop it to check or repair"
            return "damaged", text
        try:
            tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
            rows = 0
            for table in tables:  # hashing every column reads (and checksums) every block
                got = con.execute(f'SELECT count(*), bit_xor(hash(COLUMNS(*))) FROM "{table}"').fetchone()
                rows += int(got[0]) if got else 0
            memories = con.execute("SELECT count(*) FROM memories").fetchone() if "memories" in tables else None
        except duckdb.Error as exc:
            return "damaged", str(exc)
        finally:
            con.close()
    count = int(memories[0]) if memories else 0
    return "ok", f"{len(tables)} tables, {rows} rows, {count} memories"


def _indexes(path: Path) -> list[Finding]:
    root = damage.index_root(path)
    if not root.is_dir():
        return [Finding("index", str(root), "absent", "no saved indexes: the next open builds them from the store")]
    out = []
    for actor_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for sub in sorted(p for p in actor_dir.iterdir() if p.is_dir()):
            state, detail = _lexical(sub) if sub.name == "lexical" else _hnsw(sub)
            out.append(Finding("index", str(sub), state, detail))
    return out


def _hnsw(directory: Path) -> tuple[str, str]:
    from mempager.index import manifest as persist  # lazily: hnswlib and numpy only when asked

    try:
        saved = persist.read_manifest(directory)
        if saved is None:
            return "damaged", f"no {persist.MANIFEST_NAME} (a save that never finished); rebuilt on --repair"
        for entry in saved.files.values():
            persist.verify_file(directory, entry)
    except IndexStale as exc:
        return "damaged", f"{exc}; --repair rebuilds it"
    return "ok", f"{saved.count} vectors of {saved.meta.get('model', '?')}, every file matches its manifest"


def _lexical(directory: Path) -> tuple[str, str]:
    from mempager.index.lexical import LexicalIndex  # lazily

    index = LexicalIndex()
    try:
        index.load(directory)
    except IndexStale as exc:
        return "damaged", f"{exc}; --repair rebuilds it"
    return "ok", f"{len(index)} documents, every array matches its manifest"


def _audit(path: Path) -> Finding:
    from mempager.store.duckdb import DuckDBStore  # lazily: the store imports this package's neighbours

    try:
        store = DuckDBStore(path, read_only=True)
    except StoreError as exc:
        state = "in use" if isinstance(exc, StoreLocked) else "damaged"
        return Finding("audit", str(path), state, str(exc))
    try:
        report = store.verify_audit()
    finally:
        store.close()
    if report.ok:
        return Finding("audit", str(path), "ok", f"the hash chain of {report.checked} entries verifies")
    return Finding(
        "audit",
        str(path),
        "damaged",
        f"the chain breaks at entry {report.first_broken}: {report.reason}. The trail is evidence: "
        "doctor reports it and never rewrites it",
    )


# -- repair --------------------------------------------------------------------------------------


def repair(path: Path, reopen: Callable[[list[str]], None]) -> DoctorReport:
    """Perform the safe recoveries ``diagnose`` points to; ``reopen(actors)`` opens and closes a pager of
    each actor (rebuilding and saving its lanes). Returns the diagnosis after, with what was done."""
    path = Path(path)
    before = diagnose(path)
    if any(f.state == "in use" for f in before.findings):
        raise StoreLocked(f"{path} is open in another process; stop it (or its server) before `doctor --repair`")
    actions: list[str] = []
    rebuild = False
    with damage.exclusive(path) as mine:
        if not mine:
            raise StoreLocked(f"{path} is open in another process; stop it before `doctor --repair`")
        main, wal = before.of("main")[0], before.of("wal")[0]
        if main.state == "foreign":
            actions.append(f"left {path} alone: it is not a mempager store")
        elif main.state == "damaged":
            actions += _move_store_aside(path)
        elif wal.state == "damaged":
            actions.append(_set_wal_aside(path, Path(wal.path)))
            rebuild = damage.drop_saved_indexes(path)
            if rebuild:
                actions.append("removed the saved indexes: they may hold what the log no longer has")
        for finding in before.of("index"):
            if finding.state == "damaged" and Path(finding.path).exists():
                shutil.rmtree(finding.path)
                actions.append(f"removed the damaged index {finding.path}")
                rebuild = True
    if rebuild and path.exists():
        actors = _actors(path)
        reopen(actors)
        actions.append(f"rebuilt the indexes of {len(actors)} actors from the store")
    return replace(diagnose(path), actions=tuple(actions))


def _set_wal_aside(path: Path, wal: Path) -> str:
    scan = damage.scan_wal(wal)
    if scan is not None and scan.damaged:
        target = damage.set_aside_wal(wal, scan)
        return f"kept the whole log in {target} and cut {wal.name} to its {scan.entries} intact entries"
    target = damage.aside_name(wal)  # frames and checks, yet DuckDB cannot replay it on this main file
    os.replace(wal, target)
    return f"moved {wal.name} to {target}: DuckDB cannot replay it on this main file"


def _move_store_aside(path: Path) -> list[str]:
    """Move the main file, its WAL and its indexes aside under one timestamp; a new store starts at ``path``."""
    target = damage.aside_name(path)
    suffix = target.name[len(path.name) :]  # ".damaged-<time>"
    moved = []
    for source in (path, path.with_name(path.name + ".wal"), damage.index_root(path)):
        if source.exists():
            dest = source.with_name(source.name + suffix)
            os.replace(source, dest)
            moved.append(f"moved {source} to {dest}")
    return moved + [f"the next open starts a new, empty store at {path}; the old files stay where they were moved"]


def _actors(path: Path) -> list[str]:
    from mempager.store.duckdb import DuckDBStore  # lazily, as in _audit

    store = DuckDBStore(path, read_only=True)
    try:
        return store.actors()
    finally:
        store.close()
