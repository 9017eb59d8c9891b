"""The compiled score fusion (pager/lanes/_fuse.c) under AddressSanitizer and UBSan: no out-of-bounds
access and no undefined behaviour, through random lanes (repeated labels, labels no lane ranked,
empty lanes, labels at the ends of int64) and the errors it raises, each answer the numpy path's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..sanitizer_helpers import run_sanitized

SOURCE = Path(__file__).resolve().parents[2] / "pager" / "lanes" / "_fuse.c"

CHILD = r"""
import importlib.util, random, sys
spec = importlib.util.spec_from_file_location("mempager.lanes._fuse", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules["mempager.lanes._fuse"] = module
spec.loader.exec_module(module)
from mempager.lanes import fused
assert fused._fuse is module
from mempager.lanes.fused import UNEMBEDDED, _fuse_numpy, fuse_order

fallbacks = []
fused._fuse_numpy = lambda *args: fallbacks.append(args) or _fuse_numpy(*args)  # fuse_order's way around the kernel

rng = random.Random(int(sys.argv[2]))
names = ["semantic", "lexical", "salience", "prior", "speaker", "time"]
edges = [-(1 << 63), (1 << 63) - 1, -1, 0]
checked = 0
for case in range(int(sys.argv[3])):
    pool = list(range(rng.choice([1, 5, 60, 400]))) + rng.sample(edges, 2)
    score = lambda: rng.choice([rng.uniform(-1, 1), rng.uniform(0, 30), 0.0, 1.0])
    chosen = rng.sample(names, rng.randint(0, 6))
    lanes = {n: [(rng.choice(pool), score()) for _ in range(rng.randint(0, 60))] for n in chosen}
    completions = {
        n: {rng.choice(pool + [10_000 + i]): score() for i in range(rng.randint(0, 40))}
        for n in rng.sample(names + [UNEMBEDDED], rng.randint(0, 4))
    }
    weights = {n: rng.choice([0.0, 0.2, 0.5, 1.0, -0.5]) for n in names if rng.random() < 0.8}
    floor = rng.choice([0.0, 0.1, 0.3, -0.2])
    got, want = fuse_order(lanes, completions, weights, floor), _fuse_numpy(lanes, completions, weights, floor)
    assert got.records() == want.records(), case
    checked += 1
for bad in (([[(1, 0.5)]], [], [1.0]), ([[[1, 0.5]]], [None], [1.0]), ([[(1 << 70, 0.5)]], [None], [1.0])):
    try:
        module.fuse(*bad, -1, 0.0, -1, None, 0.0)
    except (ValueError, TypeError, OverflowError):
        checked += 1
assert not fallbacks, f"{len(fallbacks)} cases went around the kernel"
print(checked)
"""


@pytest.mark.slow
def test_the_fusion_kernel_is_clean_under_address_and_undefined_behaviour_sanitizers(tmp_path: Path) -> None:
    out = run_sanitized(SOURCE, "mempager.lanes._fuse", CHILD, ["11", "3000"], tmp_path)
    assert int(out.strip().splitlines()[-1]) == 3000 + 3  # every case compared, every bad call refused
