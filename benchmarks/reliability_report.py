"""Run the reliability suite (issue 7) and write ``benchmarks/results/reliability.{md,json}``.

    python -m benchmarks.reliability_report [-- extra pytest arguments]

The suite's tests report what they actually ran (iterations, examples, calls, the disk-full method)
into a temp file named by ``MEMPAGER_RELIABILITY_OUT``; pytest's JUnit XML gives each test's outcome,
wall time and failure message. Each finding carries a reproduction and where the fix belongs; it is shown
as open while its test fails and folded away as fixed once the test passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ._common import RESULTS, write_results
from .reliability_catalog import ELSEWHERE, FINDINGS, OBSERVATIONS, SUITES

REPO = Path(__file__).resolve().parents[1]


def run_suite(extra: list[str]) -> tuple[int, float, Path, tuple[float, float]]:
    out = Path(tempfile.mkdtemp(prefix="mempager-reliability-report-"))
    env = {
        **os.environ,
        "MEMPAGER_RELIABILITY_OUT": str(out / "records.jsonl"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    tests = ["tests/reliability", *ELSEWHERE.values()]
    cmd = [sys.executable, "-m", "pytest", *tests, "-q", f"--junitxml={out / 'junit.xml'}", *extra]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    rc = subprocess.run(cmd, cwd=REPO, env=env).returncode
    return rc, time.perf_counter() - start, out, (load_before, os.getloadavg()[0])


def read_junit(path: Path) -> list[dict[str, Any]]:
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        skipped = next((c for c in case if c.tag == "skipped"), None)
        outcome = problem.tag if problem is not None else "skipped" if skipped is not None else "passed"
        message = (problem.get("message") or "") if problem is not None else ""
        file = case.get("classname", "").rsplit(".", 1)[-1] + ".py"
        cases.append(
            {
                "id": f"{file}::{case.get('name')}",
                "file": file,
                "outcome": outcome,
                "seconds": round(float(case.get("time", 0)), 1),
                "message": message.strip().splitlines()[0][:300] if message else "",
            }
        )
    return cases


def counts(suite: str, records: list[dict[str, Any]]) -> str:
    mine = [r for r in records if r["suite"] == suite]
    if suite == "kill9" and mine:
        r = mine[0]
        points = ", ".join(f"{k} {v}" for k, v in sorted(r["kill_points"].items(), key=lambda kv: -kv[1]))
        return (
            f"{r['iterations']} kills, {r['acknowledged_ops']:,} acknowledged operations verified "
            f"(seed {r['seed']}); kill landed in: {points}"
        )
    if suite == "stateful":
        parts = [
            f"{r['examples']} examples x {r['steps_per_example']} steps ({r['steps']:,} steps run, with the "
            f"examples hypothesis abandoned; {r.get('updates', 0)} updates)"
            for r in mine
        ]
        race = [r for r in records if r["suite"] == "embedding_race"]
        parts += [
            f"race test: {r['retrieves']} retrieves right after writes, {r['misses']} missed a live memory"
            for r in race
        ]
        return "; ".join(parts)
    if suite == "fuzz" and mine:
        r = mine[0]
        per = ", ".join(f"{k} {v}" for k, v in r["per_test"].items())
        return (
            f"{r['examples']:,} examples run: {sum(r['configured'].values()):,} generated as configured plus "
            f"the explicit ones, fewer when a test fails (hypothesis stops at the first failure) ({per})"
        )
    if suite == "isolation" and mine:
        r = mine[0]
        return (
            f"{r['reads']:,} reads ({r['retrieve']:,} retrieve, {r['recall']:,} recall) + {r['page']} page(); "
            f"{r['ops'].get('probe', 0)} cross-actor probes; {r['leaks']} results from another actor "
            f"(seed {r['seed']})"
        )
    if suite == "disk_full":
        return "; ".join(
            f"{r['mode']} on {r['method']} ({r['fs_bytes'] // 2**20} MiB): first failure {r.get('first_error')}, "
            f"{r.get('acknowledged_writes_verified', 'n/a')} acknowledged memories verified"
            for r in mine
        )
    if suite == "secrets":
        return "; ".join(f"{r['scenario']}: {r['log_records']} log records" for r in mine)
    return _counts_issue24(suite, records)


def _counts_issue24(suite: str, records: list[dict[str, Any]]) -> str:
    mine = [r for r in records if r["suite"] == suite]
    if suite == "exit_without_close" and mine:
        statuses = sorted({str(r["status"]) for r in mine})
        acks = sum(int(r["acknowledged"]) for r in mine)
        kinds = sorted({f"{r['store']}/{r['embedder']}" for r in mine})
        return (
            f"{len(mine)} child processes ({', '.join(kinds)}; end, exit, raise, sigterm), exit statuses "
            f"{', '.join(statuses)}, {acks:,} acknowledged writes verified on reopen"
        )
    if suite == "damaged store" and mine:
        return f"{mine[-1]['cases']} damage cases, each opened twice in a child: " + ", ".join(mine[-1]["names"])
    if suite == "fuzz edges" and mine:
        per = mine[-1]["examples"]
        return f"{sum(per.values()):,} examples (" + ", ".join(f"{k} {v:,}" for k, v in per.items()) + ")"
    if suite == "pg trouble":
        parts = [
            f"{r['suite'].removeprefix('pg_trouble_')}: "
            + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r.items() if k != "suite")
            for r in records
            if r["suite"].startswith("pg_trouble_")
        ]
        return "; ".join(parts) or "no record"
    return "no record"


def render(cases: list[dict[str, Any]], records: list[dict[str, Any]], total: float, load: tuple[float, float]) -> str:
    lines = [
        "Reliability suite of issue 7: `python -m benchmarks.reliability_report` runs "
        "`pytest tests/reliability` and writes this file.",
        "",
        f"Whole run: {total:.0f} s wall; {sum(c['outcome'] == 'passed' for c in cases)} of {len(cases)} tests "
        "passed. Failing tests are kept failing on purpose until the code is fixed (no xfail). "
        f"Machine load (1-min average) before/after: {load[0]:.2f} / {load[1]:.2f} on {os.cpu_count()} cores: "
        "wall times grow with other work on the machine.",
        "",
        "| suite | counts actually run | wall s | result |",
        "|---|---|---|---|",
    ]
    for suite, title, file, _ in SUITES:
        mine = [c for c in cases if c["file"] == file]
        seconds = sum(c["seconds"] for c in mine)
        failed = [c for c in mine if c["outcome"] != "passed"]
        fixed = sum(
            1
            for key in FINDINGS
            if key.startswith(f"{file}::") and key in {c["id"] for c in mine} and key not in {c["id"] for c in failed}
        )
        result = f"{len(failed)} of {len(mine)} tests fail: see below" if failed else "nothing open"
        if fixed:
            result += f"; {fixed} found and fixed since"
        elif not failed:
            result = "nothing found"
        ran = counts(suite, records)
        if ran == "no record":  # a suite whose tests record nothing: how many of them ran
            ran = f"{len(mine)} tests, {sum(c['outcome'] == 'passed' for c in mine)} passed"
        lines.append(f"| {title} | {ran} | {seconds:.0f} | {result} |")
    lines += soak_rows(RESULTS)
    for suite, title, file, what in SUITES:
        lines += ["", f"## {title}", "", f"`{ELSEWHERE.get(file, f'tests/reliability/{file}')}`: {what}", ""]
        for case in (c for c in cases if c["file"] == file):
            lines.append(f"- `{case['id'].split('::', 1)[1]}`: {case['outcome']} in {case['seconds']} s")
        failed = {c["id"]: c for c in cases if c["file"] == file and c["outcome"] != "passed"}
        ran = {c["id"] for c in cases if c["file"] == file}
        fixed = [key for key in FINDINGS if key.startswith(f"{file}::") and key in ran and key not in failed]
        if not failed and not fixed:
            lines += ["", "Found: nothing."]
        elif not failed:
            lines += ["", "Found: nothing open; the findings below were fixed after the suite reported them."]
        for test_id, case in failed.items():
            known = FINDINGS.get(test_id)
            lines += ["", f"### Open: `{test_id}`", ""]
            lines += [known] if known else [f"New failure, not yet analysed: `{case['message']}`"]
        for test_id in fixed:
            title = FINDINGS[test_id].split("**")[1] if "**" in FINDINGS[test_id] else test_id
            lines += [
                "",
                f"### Fixed: `{test_id}`",
                "",
                f"<details><summary>{title}</summary>",
                "",
                FINDINGS[test_id],
                "",
                "</details>",
            ]
        extra = [r for r in records if r["suite"] == suite]
        if suite == "fuzz" and extra:
            lines += [
                "",
                "Outcomes (call: accepted or the typed error it raised):",
                "",
                ", ".join(f"{k} x{v}" for k, v in sorted(extra[0]["outcomes"].items())),
            ]
        if suite == "disk_full" and extra:
            lines += ["", "Outcomes per call (phase call: result):", ""]
            lines += [
                f"- {r['mode']} / {r['method']}: " + ", ".join(f"{k} x{v}" for k, v in r["outcomes"].items())
                for r in extra
            ]
            lines += [
                "",
                f"Method that ran: **{extra[0]['method']}** (order tried: tmpfs, loop, rlimit; "
                "`MEMPAGER_DISKFULL_METHOD` forces one).",
            ]
    lines += ["", "## Observations (not failures)", "", OBSERVATIONS]
    return "\n".join(lines)


DEFAULT_MIX = "page 70% / remember 20% / forget 5% / recall 5%"  # a soak recorded before --mix existed


def soak_rows(results: Path) -> list[str]:
    """Rows for the soaks (issue 24 item 1) from their recorded results: an hour of load is not part
    of this suite's run (``python -m benchmarks.bench_soak``), so each row says when it was measured."""
    rows = []
    for path in sorted(results.glob("soak_*.json")):
        data = json.loads(path.read_text())
        params, goals, kept = data["params"], data["goals"], data["durability"]
        calls = sum(data["calls"].values())
        passed = [name for name, goal in goals.items() if goal["pass"]]
        failed = [name.replace("_", " ") for name, goal in goals.items() if not goal["pass"]]
        rss = goals["rss_growth_after_warmup"]
        grew = rss.get("kib_per_added_memory")  # a mix that grows the store: RSS grows with its data
        ran = (
            f"`{path.stem}` ({data['date']}): {data['store']}, {params['minutes']:g} min, "
            f"{params['clients']} clients, {params.get('mix', DEFAULT_MIX)}, {params.get('prefill', 0)} prefilled; "
            f"{calls:,} calls, {data['errors_total']} errors; {kept['acknowledged_remembers']:,} acknowledged "
            f"remembers and {kept['acknowledged_forgets']:,} forgets checked, {kept['missing']} missing; "
            f"RSS growth {rss['value']:+.1%}" + (f" ({grew:.1f} KiB per memory the store gained)" if grew else "")
        )
        verdict = f"{len(passed)} of {len(goals)} goals met" + (f"; not met: {', '.join(failed)}" if failed else "")
        rows.append(f"| Soak (issue 24 item 1), recorded run | {ran} | {params['minutes'] * 60:.0f} | {verdict} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    rc, total, out, load = run_suite(extra)
    cases = read_junit(out / "junit.xml")
    records_path = out / "records.jsonl"
    records = [json.loads(x) for x in records_path.read_text().splitlines()] if records_path.exists() else []
    data = {"exit_code": rc, "seconds": round(total, 1), "load_before_after": load, "tests": cases, "records": records}
    write_results("reliability", data, render(cases, records, total, load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
