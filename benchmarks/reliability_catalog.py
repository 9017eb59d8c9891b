"""What the reliability report covers: each suite (its test file and what it checks), the findings
the suites made (shown in full while open, folded once fixed) and standing observations.
``benchmarks/reliability_report.py`` runs the tests and renders this catalog with their counts."""

from __future__ import annotations

# (suite, title, test file, what it checks)
SUITES = (
    (
        "kill9",
        "Kill -9 during a write loop",
        "test_kill9.py",
        "a child runs a seeded random workload (writes, dedup re-writes, batches, pattern reinforcements, soft "
        "and hard forgets, forgets by tag, embedding, index saves, close/reopen) and is SIGKILLed after a "
        "random delay; chains of 5 kills per store, two chains at a time. After each kill: every "
        "acknowledged write is there with its text, every batch is all-or-nothing, acknowledged forgets stay "
        "forgotten (get, recall, retrieve), pattern coverage = acknowledged reinforcements (+1 in flight), the "
        "semantic index equals the store's vectors of the active model on reopen and the live labels after "
        "`sync`, and the audit chain verifies.",
    ),
    (
        "stateful",
        "Stateful model test",
        "test_stateful.py",
        "hypothesis RuleBasedStateMachine against a dict per actor: remember, dedup re-write, `update` of the "
        "text (same uri, the old vector stops answering, re-embedded; a text another memory holds is refused) "
        "and of other fields (the vector stays), reinforce_pattern, remember_many, forget (soft, 1 in 10 hard), "
        "forget by type, forget twice, forget and get of another actor's uri, retrieve, recall (types, limit, "
        "offset, query), get, switch actor, reopen, re-embed (HashEmbedder 64 <-> 32 on reopen), sync. Every "
        "example runs exactly 30 rule steps (hypothesis' step count is only a maximum; `_min_steps` forces it; "
        "counted and asserted). Invariants after every step: the actor's memories equal the model (from the "
        "in-process mirror every lane serves; through recall's SQL on recall, actor switch, reopen and at the "
        "end), no other actor's memory, no forgotten uri from any read; index consistent on every reopen and "
        "sync. Plus a targeted test for the race the model test found.",
    ),
    (
        "fuzz",
        "Input fuzzing",
        "test_fuzz.py",
        "hypothesis over text (empty, whitespace, 1 MB +/- 1 byte, 2 MB, NUL, lone surrogates, bidi and "
        "zero-width controls, SQL), metadata and tags (deep nesting to 5,000, SQL metacharacters in keys and "
        "values, non-JSON values), recall/forget filters, vectors and labels given to "
        "`DuckDBStore.put_vectors`, `HnswIndex.add` and `HnswIndex.search` (NaN, inf, zeros, wrong dims, "
        "float64/16, int, bool, complex, str, object), uris and actors (`../x`, `/abs`, NUL, 10 KB). Each "
        "input must be accepted or refused with a `mempager.PagerError`; accepted input must read back; the "
        "baseline memories, their vectors and the audit chain are checked after every example.",
    ),
    (
        "isolation",
        "Isolation",
        "test_isolation.py",
        "5 actors in one store (alice, bob, `a:b`, `a_b` whose file-name slugs collide, and `ghost` who never "
        "writes), texts shared by all actors plus a per-actor marker word, random writes, batches, patterns, "
        "forgets, cross-actor get/forget probes, page() and reopen; every retrieve/recall result checked "
        "(owner, known uri, not forgotten, no foreign marker), k up to 10,000.",
    ),
    (
        "disk_full",
        "Disk full",
        "test_disk_full.py",
        "the store on a small filesystem (tmpfs, else loop-mounted ext4, else RLIMIT_FSIZE in the writer); "
        "a child writes batches until a write fails, then either keeps its pager until space returns "
        "(`resume`) or closes it while the disk is still full and reopens later (`close-while-full`). The "
        "failure must be a `StoreError` (ideally `StoreFull`), nothing may be untyped, and after space "
        "returns every acknowledged write is there, batches are whole, the index is consistent and the audit "
        "verifies.",
    ),
    (
        "secrets",
        "Secrets",
        "test_secrets.py",
        "canary key and token in `MEMPAGER_PROVIDER_API_KEY` / `MEMPAGER_GATEWAY_TOKEN`, every logger at "
        "DEBUG, the pager opened through the embedder chain against (a) a dead 127.0.0.1 port, (b) a gateway "
        "answering 401 that echoes the key, (c) a gateway that works at start-up then fails with the echo "
        "while embedding. remember / retrieve / recall / page / stats / audit / sync / close, forced "
        "gateway/provider errors and `mempager stats --json`: the canaries must be in no log record, "
        "exception (chained), stats value, audit entry or file the store owns.",
    ),
    (
        "exit_without_close",
        "Exit without close (issue 24 item 0)",
        "test_exit_without_close.py",
        "a real child process opens a store (DuckDB or PostgreSQL) with the hash, local MiniLM (ONNX and "
        "torch) or HTTP embedder, writes (an ack after each call returns) and ends without `close()`: off "
        "the end of the script, `sys.exit(3)`, an uncaught exception, or SIGTERM mid-loop. Its exit status "
        "must be its own (never 134), and on reopen every acknowledged write is there, embedded and found "
        "by its text, with the index files the exit saved loading as valid.",
    ),
    (
        "damaged store",
        "Damaged store files (issue 24 item 2)",
        "test_damaged_store.py",
        "a store built by a child (checkpointed writes plus writes that live only in the WAL), copied and "
        "damaged per case (torn WAL, WAL with a garbage or zero tail, a corrupt WAL entry, a half-size or "
        "zero-byte main file, a PNG or a SQLite file at the path, corrupt or missing index files, a "
        "manifest naming missing files), then opened twice in a child process: a recovered store (every "
        "acknowledged write before the damage; a damaged WAL kept whole in `<store>.wal.damaged-<time>`) "
        "or a typed error naming the file and `mempager doctor`, which `doctor --repair` then recovers. "
        "No signal, no crash loop.",
    ),
    (
        "fuzz edges",
        "Hostile input at the new edges (issue 24 item 4)",
        "test_fuzz_edges.py",
        "hypothesis inputs at each edge where outside data enters: JSONL import (as `mempager import -`), "
        "a hook's JSON on stdin (as `mempager hook`), and HTTP bodies to a real `mempager serve --http` "
        "with its token. Each input is accepted or refused the edge's typed way (never a traceback or a "
        "500), and the store's content is compared before and after every refused input.",
    ),
    (
        "pg trouble",
        "PostgreSQL under trouble (issue 24 item 5)",
        "test_pg_trouble.py",
        "a real server stopped and started with pg_ctl in the middle of page() traffic from several "
        "threads, an outage longer than the pool wait, and a pool held by slow calls: every call ends in a "
        "retried success or a typed error (StoreUnavailable, StoreBusy, StoreTimeout) within the pool wait "
        "plus the statement timeout, never a hang; every acknowledged write is there afterwards.",
    ),
    (
        "http guard",
        "HTTP surface (issue 24 item 3)",
        "test_http_guard.py",
        "the real `mempager serve --http` process with httpx and the MCP SDK client: no token and a wrong "
        "token get 401, a foreign Host or Origin 403, an oversized body 413, a burst 429; the token file is "
        "0600 and the token is in no log line.",
    ),
)

# test files outside tests/reliability that the report runs too
ELSEWHERE = {"test_http_guard.py": "tests/integrations/test_http_guard.py"}

# What the suite found, by test id: shown in full while the test fails, folded as "fixed" once it passes.
FINDINGS: dict[str, str] = {
    "test_fuzz.py::test_metadata_and_tags": """\
**Metadata is not validated: raw `TypeError`/`RecursionError`, and an accepted deep value poisons every
read of the actor.** `remember_*(metadata=...)` only checks that metadata is a mapping, then
`json.dumps` runs inside the store transaction. Non-JSON values raise a raw `TypeError`; nesting deeper than
~990 raises `RecursionError` at the write; nesting that just fits (e.g. 900) is stored, and from then on every
read of that actor (`recall`, `retrieve`, `get`) raises `RecursionError` when called from a stack a little
deeper (any framework, server or callback), because each row's metadata is `json.loads`-ed.
```python
import mempager
p = mempager.open("/tmp/r.duckdb", actor="neo", config=mempager.PagerConfig(embedder="hash"))
p.remember_fact("x", metadata={"a": {1, 2}})       # TypeError: Object of type set is not JSON serializable
deep = cur = {}
for _ in range(900):
    cur["k"] = {}; cur = cur["k"]
p.remember_fact("deep", metadata=deep)              # accepted
def at(n, f): return f() if n == 0 else at(n - 1, f)
at(150, lambda: p.recall())                         # RecursionError (json.loads), for every read of "neo"
```
Fix: `pager/writeback.py` `WriteBack._new` (and `Pager.update` / `store.update` for metadata): require
JSON-serialisable metadata with string keys and a bounded depth (say 32), refuse with `InvalidInput`.
Related (typed, so not failing): a tag holding a lone surrogate is refused by DuckDB as a generic
`StoreError` ("Python Conversion Failure"), not `InvalidText`: check tags' encodability in `_tags`.""",
    "test_fuzz.py::test_recall_and_forget_filters": """\
**`forget(where=...)` with a key recall does not take raises a raw `TypeError`.** `where` is passed as
`**where` to `recall`, so a stray key (`{"bogus": 1}`), or `limit`/`offset` (already passed by forget), is a
Python call error. `where` typically comes from outside (CLI, MCP, JSON).
```python
p.forget(where={"bogus": 1})   # TypeError: recall() got an unexpected keyword argument 'bogus'
p.forget(where={"limit": 5})   # TypeError: ... got multiple values for keyword argument 'limit'
```
Fix: `Pager.forget` (`pager/maintenance.py` / `pager/core.py`): check `where`'s keys against the filters it
allows and raise `InvalidInput` naming the unknown ones.""",
    "test_fuzz.py::test_store_put_vectors_labels": """\
**`DuckDBStore.put_vectors` lets numpy errors out for labels that are not int64.**
```python
p.store.put_vectors("m", ["a"], np.ones((1, 4), np.float32), ["h"])     # ValueError: invalid literal for int()
p.store.put_vectors("m", [2**70], np.ones((1, 4), np.float32), ["h"])   # OverflowError
p.store.put_vectors("m", [1, 2], np.ones((2, 4), np.float32), ["h"])    # StoreError with DuckDB's replacement-scan text
```
Fix: `pager/store_vectors.py` `put_vectors`: convert labels in a `try` and refuse with `InvalidInput`;
check `len(content_hashes) == len(labels)` before building the batch.""",
    "test_fuzz.py::test_hnsw_add_vectors": """\
**`HnswIndex.add` lets numpy errors out for vectors that are not numbers.** float/int/bool/complex arrays
are cast (complex with a `ComplexWarning`, dropping the imaginary part); str and object arrays that do not
parse as numbers raise numpy's error.
```python
from mempager.index.hnsw import HnswIndex
HnswIndex(4).add([1], np.full((1, 4), "seven"))                      # ValueError: could not convert string to float
HnswIndex(4).add([1], np.array([[None] * 4], dtype=object))           # TypeError: float() argument must be ...
```
Fix: `index/hnsw.py` `_prepare`: wrap `np.asarray(..., dtype=np.float32)` and refuse with `InvalidInput`
(or `DimensionMismatch`); consider refusing complex input instead of casting it.""",
    "test_fuzz.py::test_hnsw_add_labels": """\
**`HnswIndex.add` lets numpy errors out for labels that are not int64.**
```python
HnswIndex(4).add(["a"], np.ones((1, 4), np.float32))     # ValueError: invalid literal for int() with base 10
HnswIndex(4).add([2**70], np.ones((1, 4), np.float32))   # OverflowError: Python int too large to convert to C long
HnswIndex(4).add([None], np.ones((1, 4), np.float32))    # TypeError
```
(Float labels are truncated silently: `add([0.5], ...)` writes label 0.) Fix: `index/hnsw.py` `_prepare`:
convert labels in a `try`, refuse non-integral values with `InvalidInput`.""",
    "test_fuzz.py::test_hnsw_search": """\
**`HnswIndex.search` lets numpy errors out for a query that is not numbers.**
```python
HnswIndex(4).search(np.full(4, "seven"), 1)   # ValueError: could not convert string to float
```
Fix: `index/hnsw.py` `_query`: wrap the conversion, refuse with `InvalidInput`.""",
    "test_fuzz_edges.py::test_hook_json_on_stdin": """\
**A refused Stop hook input still stored the turn's outcome.** `mempager hook stop` with
`{"last_assistant_message": "0", "session_id": " "}` wrote the assistant's outcome, then
`prepare_wrap` refused the blank session id: exit 1 with one error line, but the store had changed (a
memory and an audit entry). Fixed in `cli/hook_cmd.py`: the session id is checked as `prepare_wrap`
checks it before anything is written; the input is an explicit example of the test.
""",
    "test_isolation.py::test_actors_whose_names_slug_alike_keep_their_own_saved_index": """\
**Actors whose names differ only in characters the slug flattens share one index directory.** `slug()`
maps `a:b`, `a_b`, `a@b` and `a+b` all to `a_b`, so their semantic and lexical indexes are saved to the same
place. Nothing leaks (the manifest names the actor and every hit is re-checked against the store), but each
open finds the other actor's manifest, logs "stale" and rebuilds both indexes from the store; with both
open, each close overwrites the other's files.
```python
for a in ("a:b", "a_b"):
    with mempager.open(path, actor=a, config=cfg) as p:
        p.remember_fact(f"fact of {a}"); p.sync(5)
with mempager.open(path, actor="a:b", config=cfg) as p:
    print(p.semantic.opened_how)   # rebuilt (stale: ... meta 'actor' is 'a_b', expected 'a:b' ...)
```
Fix: `pager/semantic.py` `slug` / the index directory in `pager/core.py`: make the per-actor directory
injective, e.g. `f"{slug(actor)}-{sha256(actor)[:12]}"` (this moves existing saved indexes once: they are
rebuilt from the store on first open).""",
    "test_stateful.py::test_a_memory_being_embedded_is_never_invisible": """\
**A memory that is being embedded is invisible to `retrieve` for that moment.** Found by the model test
(`retrieve(k=10_000)` returned 4 of 8 memories right after a `remember_many`). `_rank` searches the HNSW
index first and asks for `unembedded_labels()` (the salience lane's set) afterwards, without the lane lock.
If the worker indexes the memory in between, it is in neither lane for that query; only the lexical lane can
still find it. Deterministic repro (an embedder for which the query and the memory mean the same, as a real
model does for "car" / "automobile"; the hook widens the window to make the worker's step land in it):
```python
import threading, numpy as np, mempager
gate = threading.Event()
class Meaning:
    name, dim = "meaning-v1-8", 8
    def embed(self, texts, role="document"):
        if role == "document": gate.wait()
        return np.tile(np.eye(8, dtype=np.float32)[0], (len(texts), 1))
p = mempager.open("/tmp/i.duckdb", actor="neo", config=mempager.PagerConfig(embedder="hash"), embedder=Meaning())
p.remember_fact("the user drives an automobile")
print(p.retrieve("car", k=5))          # found (salience lane: not embedded yet)
orig = p.lexical.search_scored
def between_lanes(*a, **k):
    gate.set(); p.sync(timeout=5)      # the worker stores and indexes the vector here
    return orig(*a, **k)
p.lexical.search_scored = between_lanes
print(p.retrieve("car", k=5))          # [] : in neither lane
p.lexical.search_scored = orig
print(p.retrieve("car", k=5))          # found (semantic lane)
```
Without the hook it happens on its own: ~3% of retrieves issued right after a write miss a memory in the
test. Fix: `pager/retrieval.py` / `pager/core.py` `_rank`: take the unembedded snapshot before the
semantic search, or hold `semantic.lock` across the search and the snapshot (the worker holds it across
`put_vectors` + `add`). A re-worded memory (`track` moves it from the index to the unembedded set) needs the
same care.""",
    "test_stateful.py::test_pager_matches_model": """\
**`update(text=...)` left the memory deduplicated by its old text, and an update that kept the words
dropped the vector the lane still indexed.** Found when the model test gained a real `update` rule. (1) The
store's dedup key was not recomputed, so after `update(uri, text="B")` on a memory that said "A", writing
"A" again returned `uri` (now saying "B") and reinforced it, and writing "B" made a second memory. (2)
`store.update` dropped the memory's vectors whenever `text` was passed, even unchanged (every
`reinforce_pattern` passes the merged spec's text); the semantic lane judges by content hash, kept the label
indexed and did not queue it, so after `sync` the index held a label the store had no vector for.
```python
uri = p.remember_fact("amber")
p.update(uri, text="basil")
p.remember_fact("amber") == uri              # True: "amber" is gone, yet dedups onto "basil"
for _ in range(2):
    p.reinforce_pattern(PatternSpec(name="rotate a key")); p.sync()
# semantic index holds the pattern's label; store.vector_labels does not
```
Fix: `pager/maintenance.py` `Pager.update` re-keys the memory as a fresh write of the new text would be
(and refuses a text another memory of that type holds, naming it); `pager/store.py` / `pager/pgstore/store.py`
drop vectors and re-queue only when the content hash changes.""",
    "test_disk_full.py::test_disk_full[close-while-full]": """\
**`Pager.close()` on a full disk raises a raw `OSError` and leaves the store open.** Every write correctly
fails with `StoreFull` and nothing acknowledged is lost, but closing while the disk is still full fails in
the index save (`index/manifest.py` `write_rows`, via `SemanticLane.save`) with `OSError: [Errno 28]`.
`close()` has already set `_closed`, so the store is never closed (its DuckDB lock is held until the process
exits) and calling `close()` again does nothing.
```sh
mkdir /tmp/full && mount -t tmpfs -o size=4m tmpfs /tmp/full
python - <<'EOF'
import mempager
p = mempager.open("/tmp/full/agent.duckdb", actor="neo", config=mempager.PagerConfig(embedder="hash"))
n = 0
try:
    while True:
        p.remember_many([{"type": "event", "text": f"{n} {i} " + "word " * 2000} for i in range(10)]); n += 1
except mempager.StoreFull:
    pass
p.close()                 # OSError: [Errno 28] No space left on device
print(p.store.closed)     # False
EOF
```
Fix: `pager/core.py` `Pager.close`: the indexes are caches, so save them best-effort (log, and let the next
open catch up or rebuild) and always stop listeners and close the store (`try/finally`); and translate
`OSError` ENOSPC in `index/manifest.py` writes to `StoreFull` for callers that save explicitly.""",
}

OBSERVATIONS = """\
- The other disk-full methods, forced with `MEMPAGER_DISKFULL_METHOD` on the machine above. Before the
  fixes: `loop` (ext4 image) behaved like tmpfs (`StoreFull`, every acknowledged write kept, the same raw
  `OSError` from `close()` while full); `rlimit` failed with EFBIG ("File too large"), reported as a generic
  `StoreError`, and `close()` while "full" succeeded there because the small index files stay under the
  per-file limit. After them, both pass: `rlimit` reports `StoreFull` (EFBIG and EDQUOT are mapped), and on
  `loop` `close()` while full raises `StoreFull` and still closes the store.
- Fixed alongside the findings: a uri whose type segment was wrong still resolved
  (`get("mem://neo/event/<id of a fact>")` returned the fact, and `forget` of it deleted the fact).
- Forget with `hard=False` leaves bytes in the files until the next hard forget or `compact()` (documented).
- While filling the disk, writes of long texts were dominated by BM25 indexing in the write path (~25 us per
  token: a 10,000-token batch costs ~0.26 s before it returns).
- Fixed, seen while timing the model test: the embedding worker could miss a write's wake-up and sleep its
  full idle poll (10 s) before embedding it: `EmbedWorkers._idle` read the pending hint before waiting, so a
  write that landed in between notified nobody (3 of 20 single writes waited ~10 s; `sync()` was not
  affected). Now every `notify()` bumps a counter the worker reads before it looks at the queue, and it
  does not wait if the counter moved (tested in `tests/pager/test_pager.py`:
  `test_a_write_that_notifies_before_the_worker_waits_is_not_slept_through`).
"""
