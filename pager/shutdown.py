"""A process that ends with pagers still open: at the end of the script, by ``sys.exit(n)``, by an
uncaught exception, or by SIGTERM. It exits with its own status, its writes durable, its indexes saved.

Why this module exists. The embedding workers and the erasure pass run in daemon threads, so an
open pager never keeps a process alive. But a daemon thread that is still inside native code when
the interpreter finalizes is ended by ``pthread_exit`` the moment it wants the GIL back (CPython
up to 3.13). That unwinds the thread's C++ frames: DuckDB's ``catch (...)`` swallows the forced
unwind ("FATAL: exception not rethrown") and torch's ``noexcept`` frames call ``std::terminate``
("terminate called without an active exception"). Both are SIGABRT: exit 134 in place of the
script's status and traceback. So every pager that is not closed is closed here before that:

* ``track`` records each open pager; at exit the ones still open are closed, newest first
  (workers stopped and joined, the erasure pass finished, indexes saved, stores closed), then the
  hook waits, within the same bound, for any other thread of those kinds (an abandoned probe).
* When: as early as is safe. ``threading``'s exit hooks run first, when the main thread is done
  but before the non-daemon threads are joined and while ``concurrent.futures`` still takes work
  (saving an index uses a thread pool; plain ``atexit`` hooks come after the pools refuse work,
  so a save there fails and the index is rebuilt on the next open). Ours is registered after
  ``concurrent.futures``' own, so it runs before it. But a user's non-daemon thread may still be
  writing through a pager then: if any is alive, closing waits for the ``atexit`` hook, after
  those threads ended. (Python 3.12 starts no thread in either hook: saves fail, and are rebuilt.)
* SIGTERM's default action kills the process with no clean-up at all. When the disposition is the
  default and the pager is opened from the main thread, a handler turns SIGTERM into
  ``SystemExit(143)`` (128 + SIGTERM, what a shell reports and what ``mempager serve`` exits with)
  raised in the main thread: ``finally`` blocks and ``with`` exits run, then the hook above. With
  no pager open the handler re-delivers the signal under the default action: the process dies by
  SIGTERM exactly as it would have without us. A handler someone else installed is left alone.
* A close under way in the main thread is not cut by SIGTERM: the exit is raised when it ends.
  (Ctrl-C needs nothing of this: its ``KeyboardInterrupt`` unwinds to the exit hooks by itself.)
* A forked child inherits the registry but not the threads, and its copy of a store connection is
  not its own to close: the child forgets every inherited pager.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 - its exit hook is registered first, so ours runs before it
import contextlib
import itertools
import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Iterator
from types import FrameType
from typing import Protocol

log = logging.getLogger("mempager.shutdown")

# How long the exit hook waits, in all, for background threads to finish what they are doing (a
# batch being embedded, a model being loaded, an erasure pass). Abandoning a thread in native code
# is what aborts the process, so this is generous; it is only reached when an embedder hangs.
EXIT_JOIN_SECONDS = 60.0
TERM_STATUS = 128 + signal.SIGTERM
# Threads that end by themselves once their pager is closed (or, a probe, when its call returns);
# a server thread such as the CLI relay ("mempager-relay") is stopped by its owner, not waited for.
_BOUNDED = ("mempager-embed-", "mempager-erase-", "mempager-probe-")


class _Workers(Protocol):
    def stop(self, timeout: float = ...) -> None: ...


class Closable(Protocol):
    """What the exit hook needs of a pager (``Pager`` is one; typed here so this module imports no kernel)."""

    @property
    def workers(self) -> _Workers: ...

    def close(self) -> None: ...


# Weak references: an open pager must not be kept alive for the life of the process by this list
# alone. One with running workers stays reachable anyway (its threads hold its lane and store, and
# the store holds the pager as its change listener), so it is still here at exit.
# Keys count up, so "newest first" is the reverse order of the keys.
_open: weakref.WeakValueDictionary[int, Closable] = weakref.WeakValueDictionary()
_counter = itertools.count()
_lock = threading.Lock()
_main_closing = 0  # depth of close() calls under way in the main thread
_term_pending = False  # SIGTERM arrived during such a close: exit when it ends
_exiting = False  # the exit hook runs: every pager is being closed already


def track(pager: Closable) -> None:
    """Close ``pager`` at interpreter exit if it is still open then; convert SIGTERM if we may."""
    with _lock:
        _open[next(_counter)] = pager
    _install_sigterm()


def untrack(pager: Closable) -> None:
    with _lock:
        for key in [key for key, tracked in _open.items() if tracked is pager]:
            del _open[key]


def open_pagers() -> list[Closable]:
    """The pagers of this process not closed yet, newest first."""
    with _lock:
        return [pager for _, pager in sorted(_open.items(), reverse=True)]


@contextlib.contextmanager
def closing(pager: Closable) -> Iterator[None]:
    """Around one pager's close: untracks it; in the main thread, a SIGTERM waits for the end."""
    global _main_closing, _term_pending
    main = threading.current_thread() is threading.main_thread()
    if main:
        _main_closing += 1
    error: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        error = exc
        raise
    finally:
        untrack(pager)
        if main:
            _main_closing -= 1
            if _main_closing == 0 and _term_pending and not _exiting:
                _term_pending = False
                if error is not None:  # SIGTERM wins, but what went wrong is said first
                    log.error("closing a pager failed while SIGTERM waited: %s: %s", type(error).__name__, error)
                raise SystemExit(TERM_STATUS)


def _install_sigterm() -> None:
    """Our handler, only over the default disposition and only from the main thread (where Python
    lets a handler be set); an ignored SIGTERM or anyone's handler stays as it is."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError as exc:  # not the main interpreter: it cannot set handlers; the exit hook still runs
        log.debug("SIGTERM left at its default action: %s", exc)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    if _exiting:  # the exit hook is closing everything already: what SIGTERM asks is under way
        return
    if _main_closing:
        global _term_pending
        _term_pending = True
        return
    if not open_pagers():
        # Nothing of ours to save: end as the default action would, killed by SIGTERM.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise SystemExit(128 + signum)


def _close_early() -> None:
    """``threading``'s exit hook: close now, unless a non-daemon thread might still use a pager."""
    main = threading.main_thread()
    others = [t.name for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]
    if others:
        log.debug("open pagers are closed after the threads %s end", ", ".join(others))
        return
    _close_all_at_exit()


def _close_all_at_exit() -> None:
    """Close every pager still open, then let no mempager thread be cut off (both exit hooks)."""
    global _exiting
    _exiting = True
    deadline = time.monotonic() + EXIT_JOIN_SECONDS
    for pager in open_pagers():
        try:
            # the workers first, with the exit's bound: close() alone gives them less time
            pager.workers.stop(max(0.0, deadline - time.monotonic()))
            pager.close()
        except RuntimeError as exc:
            if "shutdown" not in str(exc):
                log.exception("closing an open pager at exit failed")
            else:  # no thread can start any more (see "When" above): the store is closed, no index saved
                log.warning("a pager closed at exit could not save its index files (rebuilt on the next open): %s", exc)
        except Exception:  # noqa: BLE001 - the others must still be closed; this one is logged
            log.exception(
                "closing an open pager at exit failed; its acknowledged writes are in the store and "
                "its index files are rebuilt or caught up on the next open"
            )
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and thread.name.startswith(_BOUNDED):
            thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in threading.enumerate() if t is not current and t.name.startswith(_BOUNDED)]
    if left:
        log.warning(
            "threads %s still run at exit after %.0f s (a hung embedder?); the interpreter may abort "
            "while they are in native code",
            ", ".join(left),
            EXIT_JOIN_SECONDS,
        )


def _forget_inherited() -> None:
    """In a forked child: the pagers are the parent's (their threads did not survive the fork)."""
    global _lock, _main_closing, _term_pending
    _lock = threading.Lock()  # another thread may have held it at the fork
    _open.clear()
    _main_closing, _term_pending = 0, False


# At import (before any pager exists): atexit runs hooks last-registered first, so the hooks of
# code imported after mempager (the user's included) run while the pagers are still open.
atexit.register(_close_all_at_exit)
_register_early = getattr(threading, "_register_atexit", None)  # private, CPython >= 3.9
if _register_early is not None:
    _register_early(_close_early)
os.register_at_fork(after_in_child=_forget_inherited)
