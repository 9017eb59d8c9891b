"""What an ONNX export of a local model is on disk, shared by the exporter and the runtime.

An export lives in ``<cache>/<sha256 of the weights>/<variant>/`` and holds ``model.onnx``,
``tokenizer.json`` (the model's own fast tokenizer, with its truncation and padding set the way
sentence-transformers calls it), ``probe.npy`` (the torch vectors of ``PROBE_TEXTS``) and
``manifest.json``, written last. The manifest records the weights' sha256, a fingerprint of every
file that shapes the vectors (tokenizer, configs, pooling), our format version, the sha256 of
each exported file, and the cosine bound the export met against torch. An export whose manifest
does not match the model on disk now is stale and is never served; it is exported again.

The cache is outside the working tree: ``$MEMPAGER_ONNX_CACHE_DIR`` (``EmbedderSettings
.onnx_cache_dir``), else ``$XDG_CACHE_HOME/mempager/onnx``, else ``~/.cache/mempager/onnx``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mempager.embedders.errors import OnnxExportUnusable
from mempager.embedders.local import file_sha256

Variant = Literal["fp32", "int8"]
FORMAT = 2  # bump when the export recipe changes: every older export becomes stale (2: int8 7-bit weights)
# (Not bumped for the TorchScript exporter, onnx_export._to_onnx: its graph gives the dynamo one's vectors,
# min cosine 0.9999999 fp32 / 0.997479 int8 over the LoCoMo questions either way, so older exports stay valid.)
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
PROBE_FILE = "probe.npy"
MANIFEST_FILE = "manifest.json"

# fp32 must match torch to float noise to be recorded under the torch model's own name; int8 is
# a different model (its own name) and must stay within 0.99 cosine of torch to be worth using.
BOUNDS: dict[Variant, float] = {"fp32": 0.9999, "int8": 0.99}

# What every export is checked on against torch, when it is made and each time it is opened:
# short and long (truncated at the model's limit), empty-ish, unicode, code, ids and numbers.
PROBE_TEXTS: tuple[str, ...] = (
    "What pet does the user have?",
    "When did Caroline go to the LGBTQ support group?",
    "Never deploy on a red CI run.",
    "The deploy key is in vault at secret/billing/deploy (key id 7f3a9c2e).",
    "",
    "   \n\t ",
    "a",
    "ok",  # one-word texts are where int8 drifts most (onnx_export: 0.990 and 0.986 with 8-bit weights on AVX2)
    "hmm",
    "Ünïcödé: naïve café, 東京で会いましょう, Привет мир, 🎉🚀",
    "def area(r):\n    return 3.14159 * r ** 2  # circle",
    "2024-05-08T13:56:00Z GET /api/v1/users?id=42 -> 404 (trace 9f86d081884c7d65)",
    "I went hiking with my sister last weekend and we saw a black bear near the lake at dawn.",
    " ".join(
        f"Session {i}: the release agent tagged build {1000 + i}, ran the integration suite, "
        f"and noted that test_invoice_rounding failed {i % 3} times before passing."
        for i in range(24)
    ),  # ~600 tokens: only the first 256 count, for torch and ONNX alike
)

# The files of a model directory, besides its weights, that change the vectors it gives.
_SOURCE_FILES = (
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "1_Pooling/config.json",
)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "mempager" / "onnx"


def export_dir(cache_dir: str | os.PathLike[str] | None, weights_sha256: str, variant: Variant) -> Path:
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return root / weights_sha256 / variant


def fingerprint(model_dir: Path, weights_sha256: str, variant: Variant) -> str:
    """One hash of everything an export depends on: weights, model files, format and variant."""
    digest = hashlib.sha256(f"mempager-onnx-v{FORMAT}|{variant}|{weights_sha256}".encode())
    for name in _SOURCE_FILES:
        path = model_dir / name
        digest.update(f"|{name}|".encode())
        digest.update(path.read_bytes() if path.is_file() else b"<absent>")
    return digest.hexdigest()


@dataclass(frozen=True, kw_only=True)
class Manifest:
    format: int
    variant: Variant
    weights_sha256: str
    fingerprint: str
    files: dict[str, str]  # file name -> sha256
    dim: int
    inputs: tuple[str, ...]  # the graph's input names, in the order the exporter gave them
    bound: float
    probe_min_cosine: float
    probe_mean_cosine: float
    versions: dict[str, str]

    def to_json(self) -> str:
        data: dict[str, Any] = {**self.__dict__, "inputs": list(self.inputs)}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def read_manifest(directory: Path) -> Manifest:
    """The manifest of the export in ``directory``; ``OnnxExportUnusable`` when absent or unreadable."""
    path = directory / MANIFEST_FILE
    if not path.is_file():
        raise OnnxExportUnusable(f"no ONNX export at {directory}", kind="missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Manifest(
            format=int(data["format"]),
            variant=_variant(data["variant"]),
            weights_sha256=str(data["weights_sha256"]),
            fingerprint=str(data["fingerprint"]),
            files={str(k): str(v) for k, v in dict(data["files"]).items()},
            dim=int(data["dim"]),
            inputs=tuple(str(x) for x in data["inputs"]),
            bound=float(data["bound"]),
            probe_min_cosine=float(data["probe_min_cosine"]),
            probe_mean_cosine=float(data["probe_mean_cosine"]),
            versions={str(k): str(v) for k, v in dict(data["versions"]).items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise OnnxExportUnusable(
            f"the ONNX export manifest {path} is unreadable ({type(exc).__name__}: {exc})", kind="corrupt"
        ) from exc


def check_manifest(manifest: Manifest, directory: Path, *, fingerprint: str, variant: Variant) -> None:
    """Raise ``OnnxExportUnusable`` unless ``manifest`` describes this model and its files are intact."""
    if manifest.format != FORMAT or manifest.variant != variant or manifest.fingerprint != fingerprint:
        raise OnnxExportUnusable(
            f"the ONNX export at {directory} was made from other model files or by another exporter "
            f"version (format {manifest.format}, variant {manifest.variant})",
            kind="stale",
        )
    expected = {MODEL_FILE, TOKENIZER_FILE, PROBE_FILE}
    if set(manifest.files) != expected:
        raise OnnxExportUnusable(f"the ONNX export at {directory} lists {sorted(manifest.files)}", kind="corrupt")
    for name, sha in sorted(manifest.files.items()):
        path = directory / name
        try:
            actual = file_sha256(path)
        except OSError as exc:
            raise OnnxExportUnusable(f"cannot read {path}: {exc}", kind="corrupt") from exc
        if actual != sha:
            raise OnnxExportUnusable(f"{path} has sha256 {actual}, its manifest says {sha}", kind="corrupt")


def _variant(value: object) -> Variant:
    if value == "fp32":
        return "fp32"
    if value == "int8":
        return "int8"
    raise ValueError(f"unknown variant {value!r}")
