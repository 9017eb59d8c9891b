"""DeferredEmbedder and local_identity: a local model's name and width without loading it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from mempager.embedders import HashEmbedder, LocalEmbedder
from mempager.embedders.deferred import DeferredEmbedder
from mempager.embedders.local import local_identity
from mempager.errors import EmbedderUnavailable
from mempager.protocols import Embedder
from mempager.types import FloatMatrix

HASH32 = HashEmbedder(dim=32).name


class Counting:
    """Builds a hash embedder, counting the builds (slowly, so concurrent first embeds overlap)."""

    def __init__(self, dim: int = 32, fail: Exception | None = None) -> None:
        self.builds = 0
        self.dim = dim
        self.fail = fail
        self.entered = threading.Event()

    def __call__(self) -> Embedder:
        self.builds += 1
        self.entered.set()
        threading.Event().wait(0.05)
        if self.fail is not None:
            raise self.fail
        return HashEmbedder(dim=self.dim)


def test_name_and_dim_are_known_before_anything_is_built() -> None:
    build = Counting()
    deferred = DeferredEmbedder(HASH32, 32, build)
    assert (deferred.name, deferred.dim, deferred.loaded, build.builds) == (HASH32, 32, False, 0)


def test_first_embed_builds_once_even_from_many_threads() -> None:
    build = Counting()
    deferred = DeferredEmbedder(HASH32, 32, build)
    out: list[FloatMatrix] = []
    threads = [threading.Thread(target=lambda: out.append(deferred.embed(["a b c"]))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert build.builds == 1 and deferred.loaded and len(out) == 8
    np.testing.assert_array_equal(out[0], HashEmbedder(dim=32).embed(["a b c"]))


def test_a_model_that_fails_to_load_fails_every_embed_typed_and_is_built_once() -> None:
    build = Counting(fail=OSError("weights missing"))
    deferred = DeferredEmbedder("st:m", 32, build)
    for _ in range(3):
        with pytest.raises(EmbedderUnavailable, match="weights missing"):
            deferred.embed(["x"])
    assert build.builds == 1 and not deferred.loaded


def test_a_model_that_loads_as_another_is_refused() -> None:
    deferred = DeferredEmbedder(HASH32, 64, Counting(dim=32))  # the files said 64
    with pytest.raises(EmbedderUnavailable, match=f"loaded as {HASH32} with 32"):
        deferred.embed(["x"])


def test_bad_input_is_refused_before_loading() -> None:
    build = Counting()
    deferred = DeferredEmbedder(HASH32, 32, build)
    with pytest.raises(Exception, match="role"):
        deferred.embed(["x"], role="nonsense")  # type: ignore[arg-type]
    assert build.builds == 0


def test_local_identity_of_an_unknown_module_stack_is_none(tmp_path: Path) -> None:
    directory = tmp_path
    (directory / "modules.json").write_text('[{"idx": 0, "path": "", "type": "some.custom.Module"}]')
    assert local_identity(directory) is None
    (directory / "modules.json").write_text("not json")
    assert local_identity(directory) is None
    assert local_identity(directory / "missing") is None


def test_local_identity_reads_pooling_and_dense_widths(tmp_path: Path) -> None:
    directory = tmp_path / "mymodel"
    (directory / "1_Pooling").mkdir(parents=True)
    (directory / "2_Dense").mkdir()
    modules = [
        {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (directory / "modules.json").write_text(json.dumps(modules))
    pooling = {"word_embedding_dimension": 256, "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}
    (directory / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    assert local_identity(directory) == ("st:mymodel", 512)  # two pooling modes, concatenated
    modules.append({"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (directory / "modules.json").write_text(json.dumps(modules))
    (directory / "2_Dense" / "config.json").write_text('{"in_features": 512, "out_features": 128}')
    assert local_identity(directory) == ("st:mymodel", 128)


@pytest.mark.slow
def test_local_identity_matches_the_loaded_packaged_model(minilm: LocalEmbedder) -> None:
    assert local_identity(None) == (minilm.name, minilm.dim) == ("st:all-MiniLM-L6-v2", 384)
