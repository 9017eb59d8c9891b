"""Export a loaded local model to ONNX, offline, and prove it gives torch's vectors.

The graph is the model's transformer (``torch.onnx.export``: the TorchScript exporter, or the
torch.export-based one where that fails, ``_to_onnx``) followed by our own masked mean (or CLS)
pooling and L2 normalisation, so one ONNX Runtime call returns finished vectors. The int8 variant is
``quantize_dynamic`` of that graph, per channel, on the attention projections only: with every
MatMul quantized, LoCoMo questions fell to 0.986 cosine of torch (and short texts such as "ok" to
0.95); keeping only the feed-forward down-projections in fp32 still left "ok", "yes" and "" at
0.983-0.986. With both feed-forward layers in fp32 every text stayed above 0.995 on a CPU with VNNI
(``benchmarks/results/embedders.md``). The weights are 7-bit (``reduce_range``): with 8, a CPU with
AVX2 only saturates int16 sums and LoCoMo questions fell to 0.987, "ok" and "hmm" to 0.990 and 0.986
(both now probe texts, so such an export is refused).

An export is verified before anyone can use it: the probe texts (``onnx_format.PROBE_TEXTS``:
short, long and truncated, empty, unicode) embedded by torch and by the new graph, in one padded
batch and one at a time, must agree within the variant's cosine bound, or the export is refused
with ``OnnxExportFailed``. It is written into a temporary directory beside its final place and
moved there in one rename, manifest last, under a lock file, so a reader never sees half of one.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from mempager.embedders.errors import OnnxExportFailed
from mempager.embedders.local import LocalEmbedder, file_sha256
from mempager.embedders.onnx_embedder import Runtime, load_runtime
from mempager.embedders.onnx_format import (
    BOUNDS,
    FORMAT,
    MANIFEST_FILE,
    MODEL_FILE,
    PROBE_FILE,
    PROBE_TEXTS,
    TOKENIZER_FILE,
    Manifest,
    Variant,
)
from mempager.types import FloatMatrix

logger = logging.getLogger("mempager.embedders")

_VERSIONED = ("torch", "transformers", "sentence-transformers", "tokenizers", "onnxruntime", "onnx", "onnxscript")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # the tokenizer gives all three
TRACE_OPSET = 17  # the first opset with LayerNormalization as one operator (BERT has 13 of them)
_EXAMPLE = ["mempager export example", "a longer second example, so that the example batch needs padding"]


@contextlib.contextmanager
def export_lock(directory: Path) -> Iterator[None]:
    """Held while one export of these weights is checked and made: across threads and processes."""
    try:
        import fcntl
    except ImportError as exc:  # not POSIX: no lock file, so no export (torch serves instead)
        raise OnnxExportFailed(f"exports need POSIX file locks (fcntl): {exc}") from exc
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".export.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def export(local: LocalEmbedder, target: Path, *, variant: Variant, weights_sha256: str, fingerprint: str) -> Manifest:
    """Export ``local``'s model into ``target`` (replacing what is there), verified; its manifest.

    Call it under ``export_lock(target.parent)``. Raises ``OnnxExportFailed``.
    """
    started = time.perf_counter()
    for leftover in (*target.parent.glob(".tmp-*"), *target.parent.glob(".old-*")):
        # the lock is held, so no exporter is using these: an earlier one was killed mid-export
        shutil.rmtree(leftover, ignore_errors=True)
    staging = target.parent / f".tmp-{variant}-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        inputs = _export_graph(local, staging, variant)
        manifest = _verify(local, staging, variant, inputs, weights_sha256, fingerprint)
        _install(staging, target)
    except OnnxExportFailed:
        raise
    except Exception as exc:  # torch's exporter and the quantizer raise anything: translated here
        raise OnnxExportFailed(
            f"exporting {local.name} to ONNX ({variant}) failed: {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # nothing left behind when it failed
    logger.info(
        "exported %s to ONNX (%s) at %s in %.1fs; probe cosine vs torch min %.6f",
        local.name,
        variant,
        target,
        time.perf_counter() - started,
        manifest.probe_min_cosine,
    )
    return manifest


def _export_graph(local: LocalEmbedder, staging: Path, variant: Variant) -> tuple[str, ...]:
    """Write the graph (and the tokenizer) into ``staging``; the graph's input names."""
    import torch

    with local.model_in_use() as model:
        transformer, pooling = _supported_stack(model, local.name)
        max_length = local.max_seq_length or int(transformer.config.max_position_embeddings)
        tokenizer = _tokenizer(model, max_length, local.name)
        tokenizer.save(str(staging / TOKENIZER_FILE))
        example = tokenizer.encode_batch(_EXAMPLE)
        args = tuple(
            torch.tensor([getattr(e, column) for e in example], dtype=torch.int64)
            for column in ("ids", "attention_mask", "type_ids")
        )
        graph = staging / (MODEL_FILE if variant == "fp32" else "fp32.onnx")
        with torch.no_grad(), _quiet_torch_onnx(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _to_onnx(torch, _pooled_module(torch, transformer, pooling), args, graph, max_length, local.name)
        for warning in caught:  # the exporter's notes are for us, not for our caller's terminal
            logger.debug("onnx export of %s: %s", local.name, warning.message)
    if variant == "int8":
        _quantize(graph, staging / MODEL_FILE, transformer.config, local.name)
        graph.unlink()
    return _graph_inputs(staging / MODEL_FILE)


def _to_onnx(torch: Any, module: Any, args: tuple[Any, ...], graph: Path, max_length: int, who: str) -> None:
    """Write ``module`` as an ONNX graph with batch and token axes free.

    The TorchScript exporter first: it traces the MiniLM stack in 3.0 s where the torch.export-based
    one (dynamo) takes 25-27 s on a 2-core AVX2 EPYC, most of a first use's wait and of the test
    suite's exports. Tracing records the operations one example ran, so a branch on a tensor's value
    would be frozen into the graph: a BERT-style encoder has none that varies with the input (its
    masks and pooling are arithmetic), and ``_verify`` checks whatever comes out against torch on
    short, long, truncated, empty and batched texts before anyone can use it. Where the TorchScript
    exporter (legacy since torch 2.9, when dynamo became the default) is gone or fails, the dynamo
    exporter makes the graph.
    """
    names = list(_INPUTS)
    # verbose=False: the exporter prints its progress on stdout otherwise
    common = {"input_names": names, "output_names": ["sentence_embedding"], "verbose": False}
    try:
        axes = {name: {0: "batch", 1: "tokens"} for name in names}
        torch.onnx.export(
            module, args, str(graph), dynamic_axes=axes, opset_version=TRACE_OPSET, dynamo=False, **common
        )
        return
    except Exception as exc:  # noqa: BLE001 - logged with its reason; the dynamo exporter gets its chance
        logger.info(
            "TorchScript ONNX export of %s failed (%s: %s); using the dynamo exporter", who, type(exc).__name__, exc
        )
        graph.unlink(missing_ok=True)
    batch, tokens = torch.export.Dim("batch"), torch.export.Dim("tokens", max=max_length)
    shapes = {name: {0: batch, 1: tokens} for name in names}
    torch.onnx.export(module, args, str(graph), dynamic_shapes=shapes, dynamo=True, external_data=False, **common)


def _graph_inputs(path: Path) -> tuple[str, ...]:
    """The inputs the exporter kept: one the model never reads (token_type_ids) may be dropped."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {init.name for init in graph.initializer}
    return tuple(i.name for i in graph.input if i.name not in initializers)


@contextlib.contextmanager
def _quiet_torch_onnx() -> Iterator[None]:
    """torch.onnx logs notes about optional packages (torchvision...) on stderr at WARNING: they
    concern the exporter, not our caller, and a failed export is reported by its exception."""
    onnx_logger = logging.getLogger("torch.onnx")
    level = onnx_logger.level
    onnx_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        onnx_logger.setLevel(level)


def _supported_stack(model: Any, who: str) -> tuple[Any, str]:
    """The transformer and the pooling mode, if the model is Transformer → Pooling (→ Normalize)."""
    modules = list(model)
    kinds = [type(m).__name__ for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise OnnxExportFailed(f"{who}: only Transformer → Pooling (→ Normalize) models are exported, not {kinds}")
    if any(prompt for prompt in (getattr(model, "prompts", None) or {}).values()):
        raise OnnxExportFailed(f"{who}: the model prepends prompts per role; only torch applies them")
    config = modules[1].get_config_dict()
    mode = config.get("pooling_mode")  # sentence-transformers >= 6; older ones name one flag per mode
    if mode is None:
        modes = [k.removeprefix("pooling_mode_") for k, on in config.items() if k.startswith("pooling_mode_") and on]
        mode = modes[0] if len(modes) == 1 else modes
    if mode == "mean_tokens":
        mode = "mean"
    if mode == "cls_token":
        mode = "cls"
    if mode not in ("mean", "cls") or config.get("include_prompt", True) is not True:
        raise OnnxExportFailed(f"{who}: pooling {mode!r} is not exported (mean or cls only)")
    return modules[0].auto_model, str(mode)


def _tokenizer(model: Any, max_length: int, who: str) -> Any:
    """A copy of the model's fast tokenizer, truncating and padding as sentence-transformers does.

    The packaged MiniLM's tokenizer.json pads and truncates to 128 on its own; sentence-transformers
    overrides that with the model's max_seq_length (256) and pads to the batch's longest text.
    """
    from tokenizers import Tokenizer

    backend = getattr(model.tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise OnnxExportFailed(f"{who}: the model has no fast (Rust) tokenizer to export")
    tokenizer = Tokenizer.from_str(backend.to_str())
    pad_id = model.tokenizer.pad_token_id
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.no_padding()
    pad_token = model.tokenizer.pad_token or "[PAD]"
    tokenizer.enable_padding(pad_id=0 if pad_id is None else int(pad_id), pad_token=pad_token)
    return tokenizer


def _pooled_module(torch: Any, transformer: Any, pooling: str) -> Any:
    """The transformer with masked pooling and L2 normalisation on top, as one module."""
    types_used = "token_type_ids" in inspect.signature(transformer.forward).parameters

    class Pooled(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here: imported lazily
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            extra = {"token_type_ids": token_type_ids} if types_used else {}
            tokens = self.transformer(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
            if pooling == "cls":
                pooled = tokens[:, 0]
            else:
                mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
                pooled = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    return Pooled().eval()


def _quantize(source: Path, target: Path, config: Any, who: str) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    hidden, inner = getattr(config, "hidden_size", None), getattr(config, "intermediate_size", None)
    graph = onnx.load(str(source), load_external_data=False)
    shapes = {init.name: tuple(init.dims) for init in graph.graph.initializer}
    feed_forward = {(hidden, inner), (inner, hidden)}  # recognised by shape: exporters rename nodes
    keep_fp32 = [
        node.name
        for node in graph.graph.node
        if node.op_type == "MatMul" and len(node.input) == 2 and shapes.get(node.input[1]) in feed_forward
    ]
    if not keep_fp32:
        raise OnnxExportFailed(f"{who}: found no feed-forward layer ({hidden}×{inner}) to keep in fp32")
    quiet = _DropAdvice()
    logging.getLogger().addFilter(quiet)  # the quantizer logs advice on the root logger
    try:
        quantize_dynamic(
            str(source),
            str(target),
            per_channel=True,
            # 7-bit weights: a CPU without VNNI (AVX2 only) adds pairs of u8 x s8 products in int16,
            # which 8-bit weights saturate and 7-bit ones (|w| <= 64) cannot: 2 x 255 x 64 < 2^15, so
            # every CPU computes the same exact sums. On an AVX2-only EPYC: LoCoMo questions' min
            # cosine to torch 0.9868 -> 0.9975, the test texts' 0.9899 ("ok") -> 0.9924.
            reduce_range=True,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=keep_fp32,
        )
    finally:
        logging.getLogger().removeFilter(quiet)


class _DropAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Please consider to run pre-processing")


def _verify(
    local: LocalEmbedder,
    staging: Path,
    variant: Variant,
    inputs: tuple[str, ...],
    weights_sha256: str,
    fingerprint: str,
) -> Manifest:
    reference = local.embed(list(PROBE_TEXTS), role="document")  # torch: the truth the name promises
    np.save(staging / PROBE_FILE, reference.astype(np.float32), allow_pickle=False)
    manifest = Manifest(
        format=FORMAT,
        variant=variant,
        weights_sha256=weights_sha256,
        fingerprint=fingerprint,
        files={name: file_sha256(staging / name) for name in (MODEL_FILE, TOKENIZER_FILE, PROBE_FILE)},
        dim=int(reference.shape[1]),
        inputs=inputs,
        bound=BOUNDS[variant],
        probe_min_cosine=0.0,
        probe_mean_cosine=0.0,
        versions=_versions(),
    )
    runtime = load_runtime(staging, manifest, threads=1)
    cosines = np.concatenate([_cosines(runtime, reference, batch) for batch in (True, False)])
    worst, mean = float(cosines.min()), float(cosines.mean())
    if worst < manifest.bound:
        raise OnnxExportFailed(
            f"the ONNX ({variant}) export of {local.name} gives vectors only {worst:.6f} cosine from torch's "
            f"on the probe texts (text {int(cosines.argmin()) % len(PROBE_TEXTS)}; bound {manifest.bound})"
        )
    manifest = replace(manifest, probe_min_cosine=round(worst, 7), probe_mean_cosine=round(mean, 7))
    _write_synced(staging / MANIFEST_FILE, manifest.to_json().encode())
    return manifest


def _cosines(runtime: Runtime, reference: FloatMatrix, batch: bool) -> FloatMatrix:
    """Per probe text, cosine of the graph's vector with torch's: in one padded batch, or one by one."""
    texts = list(PROBE_TEXTS)
    vectors = runtime.run(texts) if batch else np.concatenate([runtime.run([t]) for t in texts])
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    result: FloatMatrix = np.sum(vectors * reference, axis=1)
    return result


def _versions() -> dict[str, str]:
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _install(staging: Path, target: Path) -> None:
    """Replace ``target`` by ``staging`` with renames: a reader sees the old export, none, or the new."""
    for name in (MODEL_FILE, TOKENIZER_FILE, PROBE_FILE):
        with (staging / name).open("rb") as handle:
            os.fsync(handle.fileno())
    if target.exists():
        retired = target.parent / f".old-{target.name}-{uuid.uuid4().hex}"
        os.replace(target, retired)
        shutil.rmtree(retired, ignore_errors=True)
    os.replace(staging, target)
    descriptor = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
