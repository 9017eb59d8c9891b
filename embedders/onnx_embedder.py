"""A local model served by ONNX Runtime from a verified export: no torch in the process.

The export (``embedders.onnx_export``) holds the transformer, our mean pooling and the L2
normalisation in one graph, and the model's own fast tokenizer; here the ``tokenizers`` package
and ``onnxruntime`` run them. Opening an export checks its manifest against the model on disk,
the sha256 of every file, and re-runs the probe texts against the stored torch vectors: an export
that fails any of these raises ``OnnxExportUnusable`` and is never served.

One session per export (and thread count) is shared by every embedder in the process: a server
with one pager per actor would otherwise hold one copy of the weights per actor. ONNX Runtime
sessions and tokenizers may be called from many threads at once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mempager.embedders.base import check_role, check_texts, check_vectors
from mempager.embedders.errors import MissingExtra, OnnxExportUnusable
from mempager.embedders.local import EXTRA_HINT
from mempager.embedders.onnx_format import (
    MODEL_FILE,
    PROBE_FILE,
    PROBE_TEXTS,
    TOKENIZER_FILE,
    Manifest,
    Variant,
    check_manifest,
    read_manifest,
)
from mempager.errors import EmbedderError
from mempager.types import FloatMatrix, Role

_ORT_ERROR_ONLY = 3  # onnxruntime's own log goes to stderr: keep only its errors


@dataclass(frozen=True)
class Runtime:
    """A loaded export: the session, the tokenizer, and what the manifest says about them."""

    session: Any  # onnxruntime.InferenceSession; Any so this module imports onnxruntime lazily
    tokenizer: Any  # tokenizers.Tokenizer
    manifest: Manifest
    output: str

    def run(self, texts: list[str]) -> FloatMatrix:
        """One batch through the graph: unit rows, padded to the batch's longest text."""
        encodings = [self.tokenizer.encode(texts[0])] if len(texts) == 1 else self.tokenizer.encode_batch(texts)
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        feeds = {name: np.asarray(columns[name], dtype=np.int64) for name in self.manifest.inputs}
        result: FloatMatrix = self.session.run([self.output], feeds)[0]
        return result


_RUNTIMES: dict[tuple[str, str, int | None, int, int], Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise MissingExtra(f"the ONNX backend of the local model needs onnxruntime: {EXTRA_HINT} ({exc})") from exc
    return onnxruntime


def open_runtime(directory: Path, *, fingerprint: str, variant: Variant, threads: int | None) -> Runtime:
    """The verified export in ``directory``, shared process-wide; ``OnnxExportUnusable`` if it is not one."""
    manifest = read_manifest(directory)
    model = directory / MODEL_FILE
    try:
        stat = model.stat()
    except OSError as exc:
        raise OnnxExportUnusable(f"cannot read {model}: {exc}", kind="corrupt") from exc
    key = (str(directory), fingerprint, threads, stat.st_size, stat.st_mtime_ns)
    with _RUNTIMES_LOCK:  # also stops two threads loading one export twice
        cached = _RUNTIMES.get(key)
        if cached is not None:
            return cached
        check_manifest(manifest, directory, fingerprint=fingerprint, variant=variant)
        runtime = load_runtime(directory, manifest, threads)
        _check_probe(runtime, directory)
        _RUNTIMES[key] = runtime
        return runtime


def load_runtime(directory: Path, manifest: Manifest, threads: int | None) -> Runtime:
    """The session and tokenizer of the export in ``directory``, as ``manifest`` describes them.

    Checks only that they load and have the manifest's inputs: ``open_runtime`` checks the rest.
    """
    ort = import_onnxruntime()
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingExtra(f"the ONNX backend needs the tokenizers package: {EXTRA_HINT} ({exc})") from exc
    options = ort.SessionOptions()
    options.log_severity_level = _ORT_ERROR_ONLY
    # None: one thread per core. Either way no spinning: on a shared machine an idle thread that
    # spins steals the core a busy one needs (measured: single queries 2-3x slower under load).
    options.intra_op_num_threads = threads or 0
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(str(directory / MODEL_FILE), options, providers=["CPUExecutionProvider"])
        tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
    except Exception as exc:  # onnxruntime and tokenizers raise their own types: translated here
        raise OnnxExportUnusable(
            f"the ONNX export at {directory} does not load ({type(exc).__name__}: {exc})", kind="corrupt"
        ) from exc
    inputs = tuple(i.name for i in session.get_inputs())
    outputs = [o.name for o in session.get_outputs()]
    if set(inputs) != set(manifest.inputs) or len(outputs) != 1:
        raise OnnxExportUnusable(
            f"the ONNX export at {directory} has inputs {inputs} and outputs {outputs}, its manifest says "
            f"{manifest.inputs}",
            kind="corrupt",
        )
    return Runtime(session=session, tokenizer=tokenizer, manifest=manifest, output=outputs[0])


PROBE_BATCH_TOKENS = 64  # probe texts up to this long are checked in one padded batch, longer ones alone


def _probe_vectors(runtime: Runtime) -> FloatMatrix:
    """The probe texts' vectors, in their order: the short ones in one padded batch (padding is
    exercised, as a worker's document batches do), each long one alone.

    One batch of them all pads every text to the truncated one's 256 tokens: 3.0 s of one core
    on an AVX2 EPYC, at every process start that opens the export, against 0.6 s this way. The
    export itself was checked both ways on every probe text (``onnx_export._verify``).
    """
    lengths = [sum(e.attention_mask) for e in runtime.tokenizer.encode_batch(list(PROBE_TEXTS))]  # unpadded
    short = [i for i, n in enumerate(lengths) if n <= PROBE_BATCH_TOKENS]
    out = np.zeros((len(PROBE_TEXTS), runtime.manifest.dim), np.float32)
    if short:
        out[short] = runtime.run([PROBE_TEXTS[i] for i in short])
    for i, n in enumerate(lengths):
        if n > PROBE_BATCH_TOKENS:
            out[i] = runtime.run([PROBE_TEXTS[i]])[0]
    return out


def _check_probe(runtime: Runtime, directory: Path) -> None:
    """The probe texts must still give the torch vectors (within the bound) under this onnxruntime."""
    try:
        reference = np.load(directory / PROBE_FILE, allow_pickle=False)
        vectors = check_vectors(_probe_vectors(runtime), len(PROBE_TEXTS), runtime.manifest.dim, "onnx probe")
    except (OSError, ValueError, EmbedderError) as exc:
        raise OnnxExportUnusable(
            f"the ONNX export at {directory} fails its probe ({type(exc).__name__}: {exc})", kind="corrupt"
        ) from exc
    except Exception as exc:  # an onnxruntime failure at run time: translated here
        raise OnnxExportUnusable(
            f"the ONNX export at {directory} fails to run ({type(exc).__name__}: {exc})", kind="corrupt"
        ) from exc
    if reference.shape != vectors.shape:
        raise OnnxExportUnusable(f"{directory / PROBE_FILE} has shape {reference.shape}", kind="corrupt")
    worst = float(np.min(np.sum(reference * vectors, axis=1)))
    if worst < runtime.manifest.bound:
        raise OnnxExportUnusable(
            f"the ONNX export at {directory} now gives vectors {worst:.6f} cosine from torch's on its probe "
            f"texts (bound {runtime.manifest.bound}); exported with {runtime.manifest.versions}",
            kind="stale",
        )


class OnnxEmbedder:
    """A local model run by ONNX Runtime. ``name`` is what the vectors are recorded under.

    Build it with ``embedders.local_backend.load_local``, which checks the weights, finds or makes
    the export, and gives the fp32 export the torch model's own name only when its vectors match
    torch's to float noise.
    """

    def __init__(
        self,
        directory: Path,
        *,
        name: str,
        fingerprint: str,
        variant: Variant,
        batch_size: int = 64,
        threads: int | None = None,
    ) -> None:
        self._runtime = open_runtime(directory, fingerprint=fingerprint, variant=variant, threads=threads)
        self._name = name
        self._directory = directory
        self._variant = variant
        # int8 graphs quantize activations with one scale per input tensor, so a text's vector
        # would depend on the other texts (and padding) in its batch: int8 runs one text per call
        self._batch_size = 1 if variant == "int8" else batch_size

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._runtime.manifest.dim

    @property
    def backend(self) -> str:
        return f"onnx-{self._variant}"

    @property
    def directory(self) -> Path:
        """The export this embedder serves."""
        return self._directory

    @property
    def manifest(self) -> Manifest:
        return self._runtime.manifest

    def __repr__(self) -> str:
        return f"OnnxEmbedder(name={self._name!r}, dim={self.dim}, backend={self.backend!r})"

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        items = check_texts(texts)
        check_role(role)  # the export is refused for models with role prompts: role changes nothing
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        # longest first, as sentence-transformers does: batches of similar lengths pad less
        order = sorted(range(len(items)), key=lambda i: -len(items[i]))
        out = np.empty((len(items), self.dim), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            try:
                out[chunk] = self._runtime.run([items[i] for i in chunk])
            except Exception as exc:  # translated here, the one place the graph is run
                raise EmbedderError(
                    f"{self._name} ({self.backend}) failed to embed {len(chunk)} texts: {type(exc).__name__}: {exc}"
                ) from exc
        return check_vectors(out, len(items), self.dim, self._name)
