"""One error tree for everything mempager raises.

Every message says what went wrong *and* what to do next. Foreign exceptions (DuckDB, httpx,
hnswlib) are translated at the seam that meets them and chained with ``raise ... from exc`` so
the original is never hidden.
"""

from __future__ import annotations


class PagerError(Exception):
    """Base class of every error mempager raises on purpose."""


class ConfigError(PagerError, ValueError):
    """A configuration value is invalid; the message quotes the bad value."""


class InvalidInput(PagerError, ValueError):
    """Input to a write or read was rejected before anything was stored."""


class EmptyText(InvalidInput):
    """Text was empty or whitespace only."""


class TextTooLong(InvalidInput):
    """Text is longer than ``PagerConfig.max_text_bytes``."""


class InvalidText(InvalidInput):
    """Text holds characters that cannot be stored (NUL bytes, lone surrogates)."""


class UnknownType(InvalidInput):
    """A memory type that mempager does not know."""


class InvalidActor(InvalidInput):
    """An actor id that cannot be used as a hard partition key."""


class InvalidTime(InvalidInput):
    """A timestamp that could not be parsed."""


class MemoryNotFound(PagerError, KeyError):
    """No memory with that uri exists for this actor (it may belong to another actor)."""

    def __str__(self) -> str:  # KeyError would repr() the message; we want it readable.
        return str(self.args[0]) if self.args else "memory not found"


class InvalidUri(InvalidInput):
    """A uri that is not of the form mem://<actor>/<type>/<id>."""


class StoreError(PagerError):
    """The store failed; the message names the file or server and what to try."""


class StoreLocked(StoreError):
    """Another process holds the store open for writing."""


class StoreFull(StoreError):
    """The disk under the store is full; nothing after the last acknowledged write was kept."""


class SchemaTooNew(StoreError):
    """The store was written by a newer mempager than this one."""


class StoreUnavailable(StoreError):
    """The store's server cannot be reached (down, restarting, unreachable) or the connection was
    lost; retry when it is back. A write named in the message was not stored, or may have been."""


class StoreBusy(StoreError):
    """Every pooled connection to the store's server stayed in use past ``pool_timeout_s`` (slow
    calls hold them); retry, or raise ``pool_max`` / ``pool_timeout_s``. The call was not run."""


class StoreTimeout(StoreError):
    """The server cancelled a statement that ran past ``statement_timeout_ms`` (or waited that long
    on a lock); retry, or raise the timeout. A cancelled write was rolled back."""


class StoreDamaged(StoreError):
    """A store file is damaged (empty, truncated, a bad block); the message names it and the
    command that recovers the store (``mempager doctor --repair``, or restoring a backup)."""


class WalReplayFailed(StoreDamaged):
    """DuckDB cannot replay the store's write-ahead log; ``mempager doctor --repair`` sets it aside."""


class NotAStore(StoreError):
    """The file at the store's path is another kind of file (an image, a SQLite database); it is not touched."""


class EmbedderError(PagerError):
    """An embedder failed; memories being embedded stay stored and pending."""


class EmbedderUnavailable(EmbedderError):
    """An embedder could not be constructed (missing extra, missing model, bad credentials)."""


class DimensionMismatch(EmbedderError):
    """A vector had the wrong dimension for its model or index."""


class NonFiniteVector(EmbedderError):
    """A vector held NaN or infinite values."""


class IndexStale(PagerError):
    """A saved index does not match the store (other model, other generation, corrupt)."""


class ConsolidationError(PagerError):
    """A session wrap could not go ahead; the message says what to do instead."""


class WrapNotOpen(ConsolidationError):
    """``save_continuity`` without an open wrap: call ``prepare_wrap()`` first (once per save)."""


class ContinuityInvalid(ConsolidationError, InvalidInput):
    """The continuity text does not follow the store's section schema; nothing was saved."""


class ShrinkRefused(ConsolidationError):
    """The new continuity would gut protected sections; the wrap stays open for a fuller one."""


class LLMError(PagerError):
    """An LLM step could not get a usable answer; the step is skipped and nothing is changed."""


class LLMUnavailable(LLMError):
    """No LLM is configured (``MEMPAGER_LLM_URL`` / ``MEMPAGER_LLM_MODEL``, or ``llm=`` in the call)."""


class LLMTimeout(LLMError):
    """The LLM did not answer within ``llm_timeout_seconds``."""


class LLMHttpError(LLMError):
    """The chat endpoint answered with an HTTP error status (or could not be reached)."""


class LLMReplyInvalid(LLMError):
    """The LLM answered, but not with what was asked: empty, not JSON, or not of the schema."""


class InsecureTokenFile(ConfigError):
    """The HTTP bearer token file is readable by others (or not a regular file); ``chmod 600`` it."""
