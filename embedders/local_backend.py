"""Which runtime serves the local model: ONNX Runtime from a verified export, or torch.

``backend`` (``EmbedderSettings.local_backend``, ``MEMPAGER_LOCAL_BACKEND``):

* ``auto`` (default): the fp32 ONNX export, made on first use from the verified weights and kept
  in the cache directory; torch when onnxruntime is missing, the device is not the CPU, or the
  export cannot be made or verified, with the reason logged as a warning. Both give the torch
  model's name: the fp32 export is only used when its vectors are torch's to float noise (cosine
  >= 0.9999 on every probe text), so the store's vectors stay comparable whichever one ran.
* ``torch``: sentence-transformers, as before.
* ``onnx``: the fp32 export or an error, never torch.
* ``onnx-int8``: the int8 export (attention projections int8, feed-forward fp32), somewhat faster
  for one query but only within 0.99 cosine of torch, so its vectors are another model's: named
  ``<name>+onnx-int8`` (a store needs ``mempager model use`` and a re-embed to switch). It embeds
  one text per call (its activation scales are per batch) and never falls back: torch's vectors
  would carry another name.

Measured in ``benchmarks/results/embedders.md``.
"""

from __future__ import annotations

import logging
import os

from mempager.embedders.errors import MissingExtra, OnnxExportFailed, OnnxExportUnusable
from mempager.embedders.local import LocalEmbedder, expected_sha256, resolve_model, weights_sha256
from mempager.embedders.onnx_embedder import OnnxEmbedder, import_onnxruntime
from mempager.embedders.onnx_format import Variant, export_dir, fingerprint
from mempager.embedders.settings import LOCAL_BACKENDS
from mempager.errors import ConfigError
from mempager.protocols import Embedder

logger = logging.getLogger("mempager.embedders")

INT8_SUFFIX = "+onnx-int8"


def backend_name(name: str, backend: str) -> str:
    """The name vectors of ``backend`` are recorded under, for a local model named ``name``."""
    return f"{name}{INT8_SUFFIX}" if backend == "onnx-int8" else name


def load_local(
    model: str | os.PathLike[str] | None = None,
    *,
    sha256: str | None = None,
    backend: str = "auto",
    cache_dir: str | os.PathLike[str] | None = None,
    batch_size: int = 64,
    device: str = "cpu",
    threads: int | None = None,
) -> Embedder:
    """The local ``model`` on ``backend`` (see the module docstring); nothing is downloaded.

    ``cache_dir`` holds the exports (default: ``onnx_format.default_cache_dir()``); ``threads``
    is ONNX Runtime's intra-op thread count (None: one per core).
    """
    if backend not in LOCAL_BACKENDS:
        raise ConfigError(f"local backend must be one of {', '.join(LOCAL_BACKENDS)}, got {backend!r}")
    if backend == "torch":
        return LocalEmbedder(model, sha256=sha256, batch_size=batch_size, device=device)
    if device != "cpu":
        if backend != "auto":
            raise ConfigError(f"the {backend} backend runs on the CPU only, got device={device!r}")
        logger.info("local model on %s: served by torch (the ONNX backend runs on the CPU only)", device)
        return LocalEmbedder(model, sha256=sha256, batch_size=batch_size, device=device)
    variant: Variant = "int8" if backend == "onnx-int8" else "fp32"
    try:
        return _onnx(model, sha256, variant, cache_dir, batch_size, threads)
    except (MissingExtra, OnnxExportFailed, OnnxExportUnusable) as exc:
        if backend != "auto":
            raise
        logger.warning(
            "local model %s: the ONNX backend is not available (%s: %s); serving it with torch instead",
            model or "all-MiniLM-L6-v2",
            type(exc).__name__,
            exc,
        )
    return LocalEmbedder(model, sha256=sha256, batch_size=batch_size, device=device)


def _onnx(
    model: str | os.PathLike[str] | None,
    sha256: str | None,
    variant: Variant,
    cache_dir: str | os.PathLike[str] | None,
    batch_size: int,
    threads: int | None,
) -> OnnxEmbedder:
    import_onnxruntime()  # before hashing anything: a missing extra is the cheapest failure
    directory, label = resolve_model(model)
    base = f"st:{label}"
    name = backend_name(base, "onnx-int8" if variant == "int8" else "onnx")
    weights = weights_sha256(directory, expected_sha256(label, sha256), base)  # ModelIntegrityError is fatal
    try:
        key = fingerprint(directory, weights, variant)
    except OSError as exc:
        raise OnnxExportFailed(f"cannot read the files of {directory}: {exc}") from exc
    target = export_dir(cache_dir, weights, variant)

    def serve() -> OnnxEmbedder:
        return OnnxEmbedder(target, name=name, fingerprint=key, variant=variant, batch_size=batch_size, threads=threads)

    try:
        return serve()
    except OnnxExportUnusable as exc:
        # missing: the first use on this machine; stale or corrupt: it must not be served
        level = logging.INFO if exc.kind == "missing" else logging.WARNING
        logger.log(level, "%s: %s; exporting it from the verified weights", name, exc)
    from mempager.embedders.onnx_export import export, export_lock  # imports torch only when exporting

    try:
        with export_lock(target.parent):
            try:
                return serve()  # another process may have made it while this one waited for the lock
            except OnnxExportUnusable as exc:
                logger.debug("%s still needs exporting: %s", target, exc)
            torch_model = LocalEmbedder(model, sha256=weights, batch_size=batch_size, device="cpu")
            export(torch_model, target, variant=variant, weights_sha256=weights, fingerprint=key)
    except OSError as exc:  # an unwritable cache directory, a full disk
        raise OnnxExportFailed(f"cannot write the ONNX export under {target.parent}: {exc}") from exc
    return serve()
