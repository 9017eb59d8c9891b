"""``import mempager, mempager.embedders, mempager.index`` must not drag in torch or sentence-transformers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
import mempager, mempager.embedders, mempager.index
from mempager.embedders import LocalEmbedder, HttpEmbedder, EmbedderSettings, pick_embedder, EmbedderChoice
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
print(",".join(heavy) or "light")
"""


def test_importing_the_packages_does_not_import_torch(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "light"
