"""The compiled BM25 kernel under AddressSanitizer and UBSan: no out-of-bounds access, no undefined
behaviour, through random indexes, writes, removals and both of its search paths.

The kernel is compiled here from index/_bm25.c with -fsanitize=address,undefined into tmp_path and
loaded in a child process (the sanitizer runtimes preloaded) in place of the installed one; the
child compares it with the numpy reference on random workloads. A memory error aborts the child
with the sanitizer's report, which the assertion shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..sanitizer_helpers import run_sanitized

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "index" / "_bm25.c"

CHILD = r"""
import importlib.util, math, random, sys
spec = importlib.util.spec_from_file_location("mempager.index._bm25", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules["mempager.index._bm25"] = module
spec.loader.exec_module(module)
import numpy as np
from mempager.index._bm25 import Kernel
assert Kernel.__module__ == "mempager.index._bm25" and module.__file__ == sys.argv[1]
from mempager.index.episodes import ContextConfig
from mempager.index.lexical import LexicalIndex
from mempager.index.lexical_context import numpy_scored

rng = random.Random(int(sys.argv[2]))
words = ["river", "stone", "cloud"] * 5 + [f"w{i}" for i in range(40)]
checked = 0
for case in range(int(sys.argv[3])):
    context = rng.choice([None, ContextConfig(window=rng.randint(0, 3), decay=0.5, gap_seconds=60.0)])
    k1, b = rng.choice([(0.6, 0.0), (1.2, 0.75)])
    index = LexicalIndex(context=context, k1=k1, b=b)
    n = rng.randint(1, 400)
    texts = [" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(n)]
    times = [rng.uniform(0, 5000) if rng.random() < 0.7 else math.nan for _ in range(n)]
    index.add(list(range(n)), texts, times)
    for step in range(6):
        if rng.random() < 0.4:
            index.remove(rng.sample(range(n + 50), rng.randint(1, 60)))
        else:
            m = rng.randint(1, 80)
            start = rng.randint(0, n + 50)
            more = [" ".join(rng.choices(words, k=rng.randint(1, 30))) for _ in range(m)]
            index.add(list(range(start, start + m)), more, [rng.uniform(0, 5000) for _ in range(m)])
        query = " ".join(rng.choices(words, k=rng.randint(1, 6)))
        terms = index.tokenizer.terms(query)
        k = rng.choice([0, 1, 5, 50])
        also = rng.sample(range(n + 100), 20)
        state = index._state
        want = numpy_scored(state, terms, k, also, index.episodes, index.k1, index.b)
        for prune_from in (0, 1 << 40):
            state.kernel = Kernel(prune_from=prune_from)
            assert index.search_scored(query, k, also) == want, (case, step, query)
            checked += 1
print(checked)
"""


@pytest.mark.slow
def test_the_kernel_is_clean_under_address_and_undefined_behaviour_sanitizers(tmp_path: Path) -> None:
    out = run_sanitized(SOURCE, "mempager.index._bm25", CHILD, ["7", "60"], tmp_path)
    assert int(out.strip().splitlines()[-1]) == 60 * 6 * 2  # every search compared, on both paths
