"""The ONNX Runtime backend of the local MiniLM: real export, real onnxruntime, checked against torch.

Every export here goes to a temporary directory (``onnx_cache`` for the session's shared ones,
``tmp_path`` for the ones a test damages): nothing is written to ~/.cache or the working tree.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from mempager.embedders import EmbedderSettings, LocalEmbedder, pick_embedder
from mempager.embedders import onnx_export as onnx_export_module
from mempager.embedders.deferred import DeferredEmbedder
from mempager.embedders.errors import MissingExtra, OnnxExportFailed, OnnxExportUnusable
from mempager.embedders.local import MINILM_SHA256, file_sha256
from mempager.embedders.local_backend import load_local
from mempager.embedders.onnx_embedder import OnnxEmbedder
from mempager.embedders.onnx_format import BOUNDS, MANIFEST_FILE, MODEL_FILE, PROBE_FILE, TOKENIZER_FILE, read_manifest
from mempager.embedders.query_cache import CachedQueryEmbedder
from mempager.errors import ConfigError

pytestmark = pytest.mark.slow

NAME = "st:all-MiniLM-L6-v2"
LONG_HEAD = " ".join(
    f"Turn {i}: Melanie painted a lake at sunrise and Caroline joined a support group." for i in range(30)
)
TEXTS = [
    "What pet does the user have?",
    "When did Caroline go to the LGBTQ support group?",
    "Where is the deploy key?",
    "",
    "  ",
    "\n\t",
    "?",
    "ok",
    "Zürich, naïve café, 東京タワー, Москва — and an emoji: 🐍🚀",
    "SELECT id FROM memories WHERE actor = 'neo' AND type = 'fact';",
    "deadbeef 0x7f3a9c2e /var/lib/mempager/store.duckdb",
    LONG_HEAD,  # ~600 tokens: only the first 256 are read
    LONG_HEAD + " Everything after the limit is different: quarterly invoices, rounding, flaky tests.",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.sum(a * b, axis=1))


def copy_export(source: OnnxEmbedder, cache: Path) -> Path:
    """A private copy of ``source``'s export in ``cache``, at the path ``load_local`` looks in."""
    target = cache / source.manifest.weights_sha256 / source.manifest.variant
    shutil.copytree(source.directory, target)
    return target


def forbid_export(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("exported again, but a valid export was there")

    monkeypatch.setattr(onnx_export_module, "export", refuse)


def test_fp32_gives_the_torch_vectors_under_the_torch_name(onnx_fp32: OnnxEmbedder, minilm: LocalEmbedder) -> None:
    assert (onnx_fp32.name, onnx_fp32.dim, onnx_fp32.backend) == (NAME, 384, "onnx-fp32")
    assert onnx_fp32.manifest.weights_sha256 == MINILM_SHA256
    assert onnx_fp32.manifest.probe_min_cosine >= BOUNDS["fp32"] == 0.9999
    torch_vectors = minilm.embed(TEXTS, role="query")
    batched = onnx_fp32.embed(TEXTS, role="query")
    single = np.concatenate([onnx_fp32.embed([t], role="query") for t in TEXTS])
    assert cosines(batched, torch_vectors).min() >= 0.9999
    assert cosines(single, torch_vectors).min() >= 0.9999
    np.testing.assert_allclose(batched, torch_vectors, atol=1e-5)


def test_long_texts_are_truncated_where_torch_truncates_them(onnx_fp32: OnnxEmbedder, minilm: LocalEmbedder) -> None:
    head, longer = onnx_fp32.embed(TEXTS[-2:])
    np.testing.assert_allclose(head, longer, atol=1e-6)  # they differ only after token 256
    torch_head, torch_longer = minilm.embed(TEXTS[-2:])
    np.testing.assert_allclose(torch_head, torch_longer, atol=1e-6)
    assert float(head @ torch_head) >= 0.9999
    short = onnx_fp32.embed([LONG_HEAD[:200]])[0]
    assert float(short @ head) < 0.999  # a shorter prefix is really another input


def test_int8_is_another_model_within_0_99_of_torch(onnx_int8: OnnxEmbedder, minilm: LocalEmbedder) -> None:
    assert (onnx_int8.name, onnx_int8.backend) == (NAME + "+onnx-int8", "onnx-int8")
    assert onnx_int8.manifest.bound == 0.99 <= onnx_int8.manifest.probe_min_cosine
    torch_vectors = minilm.embed(TEXTS, role="query")
    assert cosines(onnx_int8.embed(TEXTS, role="query"), torch_vectors).min() >= 0.99
    single = np.concatenate([onnx_int8.embed([t], role="query") for t in TEXTS])
    assert cosines(single, torch_vectors).min() >= 0.99
    assert (
        onnx_int8.manifest.files["model.onnx"] != read_manifest(onnx_int8.directory.parent / "fp32").files["model.onnx"]
    )


def test_int8_weights_are_7_bit_so_no_cpu_saturates_their_sums(onnx_int8: OnnxEmbedder) -> None:
    """With 8-bit weights, a CPU without VNNI (AVX2 only) adds u8 x s8 product pairs in int16 and
    saturates: "ok" came out 0.9899 cosine from torch on one. 7-bit weights (|w| <= 64) cannot:
    2 x 255 x 64 < 2^15."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(onnx_int8.directory / MODEL_FILE)).graph
    weights = [numpy_helper.to_array(init) for init in graph.initializer if init.data_type == onnx.TensorProto.INT8]
    assert len(weights) >= 24  # 6 layers x (query, key, value, output) projections at least
    assert all(-64 <= int(w.min()) and int(w.max()) <= 64 for w in weights)
    assert max(int(np.abs(w).max()) for w in weights) >= 32  # the range is used, not collapsed


def test_semantic_sanity_on_onnx(onnx_fp32: OnnxEmbedder) -> None:
    query = onnx_fp32.embed(["What pet does the user have?"], role="query")[0]
    pet, unrelated = onnx_fp32.embed(["My dog Rex is three", "The quarterly report is due on Friday"]) @ query
    assert pet > unrelated


def test_a_valid_export_is_reused_not_made_again(
    onnx_fp32: OnnxEmbedder, onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forbid_export(monkeypatch)
    again = load_local(backend="onnx", cache_dir=onnx_cache)
    assert isinstance(again, OnnxEmbedder) and again.directory == onnx_fp32.directory
    auto = load_local(cache_dir=onnx_cache)  # auto picks the same fp32 export
    assert isinstance(auto, OnnxEmbedder) and auto.backend == "onnx-fp32"


def test_serving_an_export_needs_neither_torch_nor_sentence_transformers(onnx_fp32: OnnxEmbedder) -> None:
    script = (
        "import sys\n"
        "from mempager.embedders.local_backend import load_local\n"
        f"e = load_local(cache_dir={str(onnx_fp32.directory.parent.parent)!r})\n"
        "v = e.embed(['where is the deploy key?'], role='query')\n"
        "heavy = sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules)\n"
        "print(type(e).__name__, e.name, v.shape, ','.join(heavy) or 'light')\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env, timeout=120
    )
    assert done.stdout.strip() == f"OnnxEmbedder {NAME} (1, 384) light"


def test_a_stale_export_is_rebuilt_never_served(
    onnx_fp32: OnnxEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = copy_export(onnx_fp32, tmp_path)
    manifest = json.loads((target / MANIFEST_FILE).read_text())
    good = manifest["fingerprint"]
    manifest["fingerprint"] = "0" * 64  # made from other model files (another sha, another tokenizer...)
    (target / MANIFEST_FILE).write_text(json.dumps(manifest))
    (target.parent / ".tmp-fp32-killed-mid-export").mkdir()  # an exporter that died: cleared under the lock
    with pytest.raises(OnnxExportUnusable) as caught:
        OnnxEmbedder(target, name=NAME, fingerprint=good, variant="fp32")
    assert caught.value.kind == "stale"
    with caplog.at_level(logging.INFO, logger="mempager.embedders"):
        rebuilt = load_local(backend="onnx", cache_dir=tmp_path)
    assert isinstance(rebuilt, OnnxEmbedder) and read_manifest(target).fingerprint == good
    assert any(r.levelno == logging.WARNING and "other model files" in r.getMessage() for r in caplog.records)
    assert any("exported st:all-MiniLM-L6-v2 to ONNX (fp32)" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(rebuilt.embed(TEXTS[:3]), onnx_fp32.embed(TEXTS[:3]), atol=1e-6)
    assert sorted(p.name for p in target.parent.iterdir()) == [".export.lock", "fp32"]  # nothing left over


def test_a_corrupt_model_file_is_exported_again_with_a_warning(
    onnx_fp32: OnnxEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = copy_export(onnx_fp32, tmp_path)
    data = bytearray((target / MODEL_FILE).read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\x00" * 64  # a damaged weight, still a parseable file
    (target / MODEL_FILE).write_bytes(bytes(data))
    with caplog.at_level(logging.INFO, logger="mempager.embedders"):
        rebuilt = load_local(backend="onnx", cache_dir=tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(target / MODEL_FILE) in m and "sha256" in m for m in warnings), warnings
    assert isinstance(rebuilt, OnnxEmbedder)
    assert read_manifest(target).files[MODEL_FILE] == file_sha256(target / MODEL_FILE)
    np.testing.assert_allclose(rebuilt.embed(TEXTS[:3]), onnx_fp32.embed(TEXTS[:3]), atol=1e-6)


@pytest.mark.parametrize(
    ("damage", "kind"),
    [
        ("garbage manifest", "corrupt"),
        ("no manifest", "missing"),
        ("unloadable model", "corrupt"),
        ("probe drifted", "stale"),
    ],
)
def test_a_damaged_export_is_refused_when_opened(
    onnx_fp32: OnnxEmbedder, tmp_path: Path, damage: str, kind: str
) -> None:
    target = copy_export(onnx_fp32, tmp_path)
    manifest = json.loads((target / MANIFEST_FILE).read_text())
    if damage == "garbage manifest":
        (target / MANIFEST_FILE).write_text('{"format": 1, "variant": ')
    elif damage == "no manifest":
        (target / MANIFEST_FILE).unlink()
    elif damage == "unloadable model":
        (target / MODEL_FILE).write_bytes(b"this is not an onnx graph")
        manifest["files"][MODEL_FILE] = hashlib.sha256(b"this is not an onnx graph").hexdigest()
        (target / MANIFEST_FILE).write_text(json.dumps(manifest))
    else:  # the graph is intact, but no longer gives the torch vectors it was checked against
        probe = np.load(target / PROBE_FILE)
        np.save(target / PROBE_FILE, np.roll(probe, 1, axis=0))
        manifest["files"][PROBE_FILE] = hashlib.sha256((target / PROBE_FILE).read_bytes()).hexdigest()
        (target / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(OnnxExportUnusable) as caught:
        OnnxEmbedder(target, name=NAME, fingerprint=manifest["fingerprint"], variant="fp32")
    assert caught.value.kind == kind


def test_an_export_below_its_bound_is_refused_and_torch_serves(
    tmp_path: Path, minilm: LocalEmbedder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(BOUNDS, "fp32", 1.5)  # no export can meet it
    with caplog.at_level(logging.WARNING, logger="mempager.embedders"):
        served = load_local(cache_dir=tmp_path)
    assert isinstance(served, LocalEmbedder) and served.name == NAME
    message = " ".join(r.getMessage() for r in caplog.records)
    assert "OnnxExportFailed" in message and "cosine" in message and "serving it with torch" in message
    weights_dir = tmp_path / MINILM_SHA256
    assert [p.name for p in weights_dir.iterdir()] == [".export.lock"]  # no export, no staging left behind


def test_without_onnxruntime_auto_falls_back_to_torch_with_a_warning(
    tmp_path: Path, minilm: LocalEmbedder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what `import` sees when it is missing
    with caplog.at_level(logging.WARNING, logger="mempager.embedders"):
        served = load_local(cache_dir=tmp_path)
    assert isinstance(served, LocalEmbedder) and served.name == NAME
    assert any("MissingExtra" in r.getMessage() and "onnxruntime" in r.getMessage() for r in caplog.records)
    for backend in ("onnx", "onnx-int8"):
        with pytest.raises(MissingExtra, match="onnxruntime"):
            load_local(backend=backend, cache_dir=tmp_path)


def test_a_failed_export_falls_back_only_in_auto(
    tmp_path: Path, minilm: LocalEmbedder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OnnxExportFailed("the exporter broke (simulated)")

    monkeypatch.setattr(onnx_export_module, "export", broken)
    with caplog.at_level(logging.WARNING, logger="mempager.embedders"):
        assert isinstance(load_local(cache_dir=tmp_path), LocalEmbedder)
    assert any("the exporter broke (simulated)" in r.getMessage() for r in caplog.records)
    for backend in ("onnx", "onnx-int8"):  # asked for by name: an error, never torch's vectors instead
        with pytest.raises(OnnxExportFailed, match="simulated"):
            load_local(backend=backend, cache_dir=tmp_path)


def test_an_unwritable_cache_falls_back_to_torch(
    tmp_path: Path, minilm: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    with caplog.at_level(logging.WARNING, logger="mempager.embedders"):
        assert isinstance(load_local(cache_dir=blocker), LocalEmbedder)
    assert any("cannot write the ONNX export" in r.getMessage() for r in caplog.records)


def test_two_threads_export_once(tmp_path: Path, minilm: LocalEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    real = onnx_export_module.export

    def counted(local: LocalEmbedder, target: Path, **kwargs: object) -> object:
        calls.append(target)
        return real(local, target, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx_export_module, "export", counted)
    results: list[object] = []
    threads = [
        threading.Thread(target=lambda: results.append(load_local(backend="onnx", cache_dir=tmp_path)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(results) == 2
    assert all(isinstance(r, OnnxEmbedder) for r in results)


def test_concurrent_embeds_on_one_session(onnx_fp32: OnnxEmbedder) -> None:
    expected = onnx_fp32.embed(TEXTS)
    failures: list[int] = []

    def worker(offset: int) -> None:
        for i in range(len(TEXTS)):
            j = (i + offset) % len(TEXTS)
            if not np.allclose(onnx_fp32.embed([TEXTS[j]])[0], expected[j], atol=1e-5):
                failures.append(j)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_settings_choose_the_backend_and_the_cache() -> None:
    settings = EmbedderSettings.from_env(
        {"MEMPAGER_LOCAL_BACKEND": "onnx-int8", "MEMPAGER_ONNX_CACHE_DIR": "/somewhere/else"}, actor="a"
    )
    assert (settings.local_backend, settings.onnx_cache_dir) == ("onnx-int8", "/somewhere/else")
    assert EmbedderSettings(actor="a").local_backend == "auto"
    with pytest.raises(ConfigError, match="'gpu-magic'"):
        EmbedderSettings.from_env({"MEMPAGER_LOCAL_BACKEND": "gpu-magic"}, actor="a")
    with pytest.raises(ConfigError, match="'gpu-magic'"):
        load_local(backend="gpu-magic")
    with pytest.raises(ConfigError, match="CPU only"):
        load_local(backend="onnx", device="cuda")


def test_the_chain_serves_onnx_under_the_torch_name(onnx_fp32: OnnxEmbedder, onnx_cache: Path) -> None:
    choice = pick_embedder(EmbedderSettings(actor="a", onnx_cache_dir=str(onnx_cache)))
    chosen = choice.embedder
    assert isinstance(chosen, CachedQueryEmbedder) and isinstance(chosen.inner, OnnxEmbedder)
    assert chosen.name == NAME and "onnx-fp32" in choice.candidates[2].reason


def test_a_deferred_int8_model_is_named_for_int8_before_it_loads(onnx_int8: OnnxEmbedder, onnx_cache: Path) -> None:
    settings = EmbedderSettings(actor="a", local_backend="onnx-int8", onnx_cache_dir=str(onnx_cache), defer_local=True)
    deferred = pick_embedder(settings).embedder
    assert isinstance(deferred, DeferredEmbedder) and not deferred.loaded
    assert deferred.name == NAME + "+onnx-int8"
    vector = deferred.embed(["where is the deploy key?"], role="query")  # loads: names must agree
    np.testing.assert_allclose(vector, onnx_int8.embed(["where is the deploy key?"], role="query"), atol=1e-6)


def _tiny_encoder() -> object:
    """A real torch module with the exported graph's three inputs and a masked mean, small enough
    that both exporters take seconds: what ``_to_onnx`` is asked to export, in miniature."""
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(50, 8)
            self.norm = torch.nn.LayerNorm(8)
            self.project = torch.nn.Linear(8, 8)

        def forward(self, input_ids: object, attention_mask: object, token_type_ids: object) -> object:
            tokens = self.project(self.norm(self.embed(input_ids + token_type_ids)))
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    torch.manual_seed(0)
    return Tiny().eval()


def _tiny_inputs(batch: int, tokens: int, seed: int) -> tuple[object, ...]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 40, (batch, tokens), generator=generator)
    mask = torch.ones(batch, tokens, dtype=torch.int64)
    mask[0, tokens // 2 :] = 0  # a padded row: the mean must skip its padding
    return ids, mask, torch.zeros(batch, tokens, dtype=torch.int64)


def _export_tiny(path: Path) -> object:
    import torch

    module = _tiny_encoder()
    with torch.no_grad(), warnings.catch_warnings():  # the exporters' notes (export_graph logs them)
        warnings.simplefilter("ignore")
        onnx_export_module._to_onnx(torch, module, _tiny_inputs(2, 6, 0), path, 16, "tiny")
    return module


def _same_as_torch(module: object, path: Path) -> None:
    """The graph, at batch and token sizes it was not traced with, gives torch's vectors."""
    import onnxruntime
    import torch

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    for batch, tokens in ((1, 3), (4, 11)):
        inputs = _tiny_inputs(batch, tokens, batch)
        with torch.no_grad():
            want = module(*inputs).numpy()
        feed = {n: t.numpy() for n, t in zip(("input_ids", "attention_mask", "token_type_ids"), inputs, strict=True)}
        got = session.run(None, {n: v for n, v in feed.items() if n in names})[0]
        np.testing.assert_allclose(got, want, atol=1e-5)


def _record_exports(monkeypatch: pytest.MonkeyPatch, *, torchscript_fails: bool) -> list[object]:
    """Each ``torch.onnx.export`` call's ``dynamo`` argument, in order; with ``torchscript_fails``
    the TorchScript exporter fails as a removed one would, after leaving a partial file."""
    import torch

    asked: list[object] = []
    real = torch.onnx.export

    def export(*args: object, **kwargs: object) -> object:
        asked.append(kwargs.get("dynamo"))
        if torchscript_fails and kwargs.get("dynamo") is False:
            Path(str(args[2])).write_bytes(b"half a graph")
            raise RuntimeError("the TorchScript-based exporter was removed")
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", export)
    return asked


def test_the_graph_is_traced_by_the_torchscript_exporter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _record_exports(monkeypatch, torchscript_fails=False)
    module = _export_tiny(tmp_path / "tiny.onnx")
    assert asked == [False]  # traced (seconds), not torch.export'ed (tens of seconds for MiniLM)
    _same_as_torch(module, tmp_path / "tiny.onnx")


def test_when_the_torchscript_exporter_fails_the_dynamo_one_makes_the_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    asked = _record_exports(monkeypatch, torchscript_fails=True)
    with caplog.at_level(logging.INFO, logger="mempager.embedders"):
        module = _export_tiny(tmp_path / "tiny.onnx")
    assert asked == [False, True]
    assert "the TorchScript-based exporter was removed" in caplog.text  # the reason is logged, not lost
    _same_as_torch(module, tmp_path / "tiny.onnx")


@pytest.mark.parametrize("which", ["the truncated text", "a short text"])
def test_the_opening_probe_checks_every_probe_text(onnx_fp32: OnnxEmbedder, tmp_path: Path, which: str) -> None:
    """Short probe texts run in one batch and long ones alone (one batch padded them all to 256
    tokens): a drift in any one text's vector is still refused."""
    from mempager.embedders.onnx_embedder import PROBE_BATCH_TOKENS
    from mempager.embedders.onnx_format import PROBE_TEXTS

    intact = copy_export(onnx_fp32, tmp_path / "intact")
    manifest = json.loads((intact / MANIFEST_FILE).read_text())
    OnnxEmbedder(intact, name=NAME, fingerprint=manifest["fingerprint"], variant="fp32")  # opens: its probe passes
    target = copy_export(onnx_fp32, tmp_path / "damaged")  # another path: not the runtime opened above
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(target / TOKENIZER_FILE))
    lengths = [len(tokenizer.encode(t).ids) for t in PROBE_TEXTS]
    long_ones = [i for i, n in enumerate(lengths) if n > PROBE_BATCH_TOKENS]
    assert long_ones and len(long_ones) < len(PROBE_TEXTS)  # both paths have texts to check
    row = long_ones[0] if which == "the truncated text" else lengths.index(min(lengths))
    probe = np.load(target / PROBE_FILE)
    probe[row] = -probe[row]  # that one text's reference now points the other way
    np.save(target / PROBE_FILE, probe)
    manifest["files"][PROBE_FILE] = hashlib.sha256((target / PROBE_FILE).read_bytes()).hexdigest()
    (target / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(OnnxExportUnusable) as caught:
        OnnxEmbedder(target, name=NAME, fingerprint=manifest["fingerprint"], variant="fp32")
    assert caught.value.kind == "stale"
