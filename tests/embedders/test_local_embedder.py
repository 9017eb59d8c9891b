"""The local sentence-transformers embedder on the real packaged MiniLM."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from mempager.embedders import LocalEmbedder
from mempager.embedders.errors import MissingExtra, ModelIntegrityError, ModelNotFound
from mempager.embedders.local import MINILM_SHA256, file_sha256
from mempager.errors import ConfigError, EmbedderUnavailable

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_copy(minilm: LocalEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-for-byte copy of the packaged model directory, outside the working tree."""
    target = tmp_path_factory.mktemp("models") / "minilm-copy"
    shutil.copytree(minilm.directory, target)
    return target


def test_default_model_is_minilm_with_verified_weights(minilm: LocalEmbedder) -> None:
    assert minilm.name == "st:all-MiniLM-L6-v2"
    assert minilm.dim == 384
    assert file_sha256(minilm.directory / "model.safetensors") == MINILM_SHA256


def test_semantic_sanity(minilm: LocalEmbedder) -> None:
    query = minilm.embed(["What pet does the user have?"], role="query")[0]
    docs = minilm.embed(["My dog Rex is three", "The quarterly report is due on Friday"], role="document")
    pet, unrelated = docs @ query
    assert pet > unrelated


def test_names_and_repr(minilm: LocalEmbedder, model_copy: Path) -> None:
    copy = LocalEmbedder(model_copy)  # no pinned hash for a directory of another name
    assert copy.name == "st:minilm-copy"
    assert LocalEmbedder(model_copy, name="st:custom").name == "st:custom"
    assert LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2").name == minilm.name
    np.testing.assert_allclose(copy.embed(["same weights"]), minilm.embed(["same weights"]), atol=1e-6)
    assert "st:all-MiniLM-L6-v2" in repr(minilm) and "384" in repr(minilm)


def test_altered_weights_are_refused(model_copy: Path, tmp_path: Path) -> None:
    tampered = tmp_path / "all-MiniLM-L6-v2"  # claims to be MiniLM, so its hash is pinned
    shutil.copytree(model_copy, tampered)
    weights = tampered / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelIntegrityError, match="sha256") as caught:
        LocalEmbedder(tampered)
    assert isinstance(caught.value, EmbedderUnavailable)
    assert MINILM_SHA256 in str(caught.value) and str(weights) in str(caught.value)


def test_explicit_sha256_is_enforced_for_any_directory(tmp_path: Path) -> None:
    fake = tmp_path / "some-model"
    fake.mkdir()
    (fake / "model.safetensors").write_bytes(b"not really weights")
    with pytest.raises(ModelIntegrityError):
        LocalEmbedder(fake, sha256="0" * 64)
    empty = tmp_path / "no-weights"
    empty.mkdir()
    with pytest.raises(ModelIntegrityError, match="no weights file"):
        LocalEmbedder(empty, sha256=MINILM_SHA256)


def test_missing_model_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound, match="does not exist"):
        LocalEmbedder(tmp_path / "nowhere")
    with pytest.raises(ModelNotFound, match="never downloads"):
        LocalEmbedder("someone/not-a-cached-model")
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(ModelNotFound, match="is a file"):
        LocalEmbedder(tmp_path / "weights.bin")


def test_missing_extra_names_the_pip_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # what an absent package looks like
    with pytest.raises(MissingExtra, match=r"pip install 'mempager\[local\]'"):
        LocalEmbedder()


def test_bad_arguments_quote_the_value() -> None:
    with pytest.raises(ConfigError, match="0"):
        LocalEmbedder(batch_size=0)
    with pytest.raises(ConfigError, match="'abc'"):
        LocalEmbedder(sha256="abc")


def test_embed_is_thread_safe(minilm: LocalEmbedder) -> None:
    texts = [f"thread test sentence {i}" for i in range(8)]
    expected = minilm.embed(texts)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(minilm.embed(texts))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 4
    for got in results:
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_a_second_embedder_shares_the_loaded_model(minilm: LocalEmbedder) -> None:
    again = LocalEmbedder(batch_size=8)
    assert again._loaded is minilm._loaded  # one copy of the weights per process
    np.testing.assert_allclose(again.embed(["shared"]), minilm.embed(["shared"]), atol=1e-6)


NO_NETWORK = """
import socket, sys
attempts = []
def deny(self, address, *args):
    attempts.append(address)
    raise OSError("network disabled by test")
socket.socket.connect = deny
socket.socket.connect_ex = deny
from mempager.embedders import LocalEmbedder
vectors = LocalEmbedder().embed(["offline?"])
print(vectors.shape, "attempts:", attempts)
"""


def test_loads_and_embeds_without_touching_the_network() -> None:
    # Without HF_HUB_OFFLINE: the guarantee must come from loading by path, not from the env var.
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    done = subprocess.run(
        [sys.executable, "-c", NO_NETWORK],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=180,
    )
    assert done.stdout.strip() == "(1, 384) attempts: []"
