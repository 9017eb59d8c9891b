"""The soak benchmark's own plumbing (benchmarks/bench_soak.py): the --mix grammar, the prefill
and the durability check that counts prefilled memories. The soak itself runs for an hour and is
not part of the suite; these check, in seconds, the parts that decide what its results mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_soak, soak_report
from benchmarks.soak_client import DEFAULT_MIX, OPS, WEIGHTS, mix_text, parse_mix


def test_mix_reads_the_shares_in_op_order_and_defaults_to_the_issue_mix() -> None:
    assert parse_mix("page=70,remember=12.5,forget=12.5,recall=5") == (70.0, 12.5, 12.5, 5.0)
    assert parse_mix(" recall = 30 , page=70 ") == (70.0, 0.0, 0.0, 30.0)  # an op left out weighs 0
    assert parse_mix(DEFAULT_MIX) == WEIGHTS
    assert mix_text(WEIGHTS) == soak_report.DEFAULT_MIX_TEXT  # runs recorded before --mix read the same


@pytest.mark.parametrize(
    ("mix", "says"),
    [
        ("page=70,remember=20", "sum to 90, not 100"),
        ("page=70,remember=20,forget=5,recal=5", "'recal=5'"),
        ("page=70,remember=30,page=0", "names 'page' twice"),
        ("page=110,remember=-10", "finite number >= 0"),
        ("page=seventy,remember=30", "'seventy' is not a number"),
        ("page 100", "op=percent"),
    ],
)
def test_a_wrong_mix_is_refused_with_what_is_wrong(mix: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="--mix") as err:
        parse_mix(mix)
    assert says in str(err.value)
    with pytest.raises(SystemExit) as exit_:  # the command line turns it into a usage error, before any work
        bench_soak.main(["--mix", mix])
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_a_tag_names_results_beside_the_default_runs() -> None:
    assert soak_report.results_name("duckdb") == "soak_duckdb"
    assert soak_report.results_name("postgres", "constant") == "soak_postgres_constant"
    with pytest.raises(SystemExit):
        bench_soak.main(["--tag", "../x"])


def test_prefilled_memories_are_stored_and_count_in_the_durability_check(tmp_path: Path) -> None:
    store = str(tmp_path / "soak.duckdb")
    prefilled = bench_soak._prefill(store, 120, seed=3)
    assert len(prefilled) == 120 and all(u.startswith("mem://") for u in prefilled)
    present = bench_soak._stored(store)
    assert present == prefilled

    first, second, third = list(prefilled)[:3]
    t0 = 1000.0
    events = [
        {"t": t0 + 1, "op": "forget", "ms": 5.0, "ok": True, "uri": first},  # a client forgot a prefilled one
        {"t": t0 + 2, "op": "remember", "ms": 5.0, "ok": True, "uri": "mem://soak/new", "text": "new"},
        {"t": t0 + 3, "op": "page", "ms": 9.0, "ok": True},
    ]
    # the store as the run left it: the forgotten one gone, one prefilled lost, one forget not applied
    after = {u: t for u, t in present.items() if u not in (first, second)} | {"mem://soak/new": "new"}
    result = soak_report.analyse(events, after, t0, 10.0, 5.0, prefilled)
    d = result["durability"]
    assert (d["prefilled"], d["acknowledged_remembers"], d["acknowledged_forgets"]) == (120, 1, 1)
    assert (d["expected_present"], d["missing"], d["missing_samples"]) == (120, 1, [second])
    assert result["calls"] == {"forget": 1, "remember": 1, "page": 1}  # prefill is not a call of the run

    undone = soak_report.analyse(events, after | {first: prefilled[first]}, t0, 10.0, 5.0, prefilled)
    assert undone["durability"]["forgotten_but_present"] == 1
    assert third in after and set(OPS) >= set(result["windows"][0]["latency"])
