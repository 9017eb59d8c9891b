"""The one settings table: every MEMPAGER_* variable is in it, the README shows it, `mempager config` prints it."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mempager.cli import main as cli_main
from mempager.cli.config_cmd import plain_table, rich_table
from mempager.config import PagerConfig
from mempager.embedders.settings import EmbedderSettings
from mempager.errors import ConfigError
from mempager.settings_table import (
    EMBEDDER,
    END,
    GROUPS,
    HIDDEN,
    PAGER,
    REGENERATE,
    START,
    Resolved,
    main,
    markdown_table,
    readme_block,
    resolve,
    settings,
)

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pager", "embedders", "index")
TOKEN = "gw-token-7f3a9c2e-do-not-print"
API_KEY = "sk-provider-91b2c3d4-do-not-print"
PASSWORD = "pg-password-5e6f7a8b"


def by_env(rows: list[Resolved]) -> dict[str, Resolved]:
    return {r.setting.env: r for r in rows}


def test_the_readme_table_is_generated_from_the_settings() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert START in readme and END in readme, f"README.md has no {START} ... {END} block"
    assert readme_block(readme) == markdown_table(), (
        f"README.md's settings table is out of date with pager/settings_table.py: run `{REGENERATE}`"
    )
    # in its own section, right after the CLI's
    headings = re.findall(r"^## (.+)$", readme, flags=re.MULTILINE)
    assert headings[headings.index("CLI") + 1] == "Settings"
    assert readme.index("## Settings") < readme.index(START) < readme.index(END) < readme.index("## How a page")


def test_every_mempager_variable_in_the_source_is_in_the_table() -> None:
    mentioned: dict[str, str] = {}
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.name == "settings_table.py":
                continue
            for name in re.findall(r"MEMPAGER_[A-Z0-9_]+", path.read_text(encoding="utf-8")):
                mentioned.setdefault(name, str(path.relative_to(REPO)))
    assert "MEMPAGER_STORE" in mentioned and "MEMPAGER_GATEWAY_TOKEN" in mentioned  # the scan sees the edges
    missing = {name: where for name, where in mentioned.items() if name not in {s.env for s in settings()}}
    assert not missing, f"add these variables to pager/settings_table.py (then run `{REGENERATE}`): {missing}"


def test_every_setting_is_described_grouped_and_listed_once() -> None:
    table = settings()
    assert len(table) >= 60
    for s in table:
        assert s.env.startswith("MEMPAGER_") and s.env == s.env.upper(), s
        assert len(s.description) > 20, f"{s.env} needs a description in pager/settings_table.py"
        assert s.group in GROUPS, s
    assert len({(s.env, s.name) for s in table}) == len(table)
    # one variable, two settings: the worker's tries per batch and the HTTP embedder's tries per request
    envs = [s.env for s in table]
    shared = {e for e in envs if envs.count(e) > 1}
    assert shared == {"MEMPAGER_EMBED_MAX_ATTEMPTS"}, f"a variable read by two settings: {shared}"
    assert [s.group for s in table] == sorted((s.group for s in table), key=GROUPS.index)
    secrets = {s.env for s in table if s.secret}
    assert secrets == {
        "MEMPAGER_GATEWAY_TOKEN",
        "MEMPAGER_PROVIDER_API_KEY",
        "MEMPAGER_LLM_API_KEY",
        "MEMPAGER_HTTP_TOKEN",
    }
    assert all(s.secret for s in table if re.search(r"_(TOKEN|KEY|PASSWORD|SECRET)$", s.env))


def test_the_pager_config_rows_are_exactly_what_from_env_reads() -> None:
    """A field is in the table if and only if ``PagerConfig.from_env`` reads its variable."""
    listed = {s.name for s in settings() if s.read_by == PAGER}
    for f in dataclasses.fields(PagerConfig):
        key = f"MEMPAGER_{f.name.upper()}"
        try:
            PagerConfig.from_env({key: "not a value"})
            read = False
        except ConfigError:
            read = True
        assert read == (f.name in listed), f"{key}: read by from_env={read}, in the table={f.name in listed}"
    defaults = PagerConfig()
    for s in settings():
        if s.read_by == PAGER:
            default = getattr(defaults, s.name)
            assert s.default == ("auto" if default is None else default), s  # None: chosen at run time


def test_the_embedder_rows_are_read_by_embedder_settings() -> None:
    types = {f.name: str(f.type) for f in dataclasses.fields(EmbedderSettings)}
    for s in settings():
        if s.read_by != EMBEDDER:
            continue
        sample = "7" if "int" in types[s.name] else "2.5" if "float" in types[s.name] else "sample-value"
        sample = {"local_backend": "onnx-int8"}.get(s.name, sample)  # a choice, not free text
        read = EmbedderSettings.from_env({s.env: f" {sample} "}, actor="a")
        expected = {"7": 7, "2.5": 2.5}.get(sample, sample)
        assert getattr(read, s.name) == expected, f"EmbedderSettings.from_env does not read {s.env} into {s.name}"
        assert s.default == getattr(EmbedderSettings(actor="a"), s.name)


def test_values_from_the_environment_say_so() -> None:
    rows = by_env(
        resolve(
            {
                "MEMPAGER_HNSW_EF": "64",
                "MEMPAGER_DEFER_MODEL_LOAD": "yes",
                "MEMPAGER_FUSION": "rrf",
                "MEMPAGER_GATEWAY_URL": " http://gateway.internal:8080 ",
                "MEMPAGER_PROVIDER_URL": "   ",  # blank: EmbedderSettings reads it as unset
                "MEMPAGER_ACTOR": "neo",
                "MEMPAGER_LOCAL_MODEL": "off",
                "MEMPAGER_EMBED_READ_TIMEOUT": "12",
                "UNRELATED": "x",
            }
        )
    )
    expect = {
        "MEMPAGER_HNSW_EF": 64,
        "MEMPAGER_DEFER_MODEL_LOAD": True,
        "MEMPAGER_FUSION": "rrf",
        "MEMPAGER_GATEWAY_URL": "http://gateway.internal:8080",
        "MEMPAGER_ACTOR": "neo",
        "MEMPAGER_LOCAL_MODEL": "off",
        "MEMPAGER_EMBED_READ_TIMEOUT": 12.0,
    }
    for env, value in expect.items():
        assert (rows[env].value, rows[env].source) == (value, "environment"), rows[env]
    for env, r in rows.items():
        if env not in expect:
            assert (r.value, r.source) == (r.setting.default, "default"), r
    assert rows["MEMPAGER_STORE"].value == ".mempager/store.duckdb"


def test_secrets_are_never_shown() -> None:
    environ = {
        "MEMPAGER_GATEWAY_TOKEN": TOKEN,
        "MEMPAGER_PROVIDER_API_KEY": API_KEY,
        "MEMPAGER_STORE": f"postgresql://agent:{PASSWORD}@db.internal:5432/memory?schema=billing",
        "MEMPAGER_PROVIDER_URL": f"https://user:{PASSWORD}@embed.example/v1",
    }
    resolved = resolve(environ)
    rows = by_env(resolved)
    assert rows["MEMPAGER_GATEWAY_TOKEN"][1:] == (HIDDEN, "environment")
    assert rows["MEMPAGER_PROVIDER_API_KEY"][1:] == (HIDDEN, "environment")
    assert rows["MEMPAGER_STORE"].value == "postgresql://agent:***@db.internal:5432/memory?schema=billing"
    assert rows["MEMPAGER_PROVIDER_URL"].value == "https://user:***@embed.example/v1"
    assert by_env(resolve({}))["MEMPAGER_GATEWAY_TOKEN"].value is None
    buffer = io.StringIO()
    assert rich_table(resolved, buffer, width=250)
    for shown in (plain_table(resolved), buffer.getvalue(), repr(resolved)):
        for secret in (TOKEN, API_KEY, PASSWORD):
            assert secret not in shown


def test_a_bad_value_is_reported_invalid_and_the_rest_still_resolve() -> None:
    rows = by_env(
        resolve(
            {
                "MEMPAGER_HNSW_EF": "lots",
                "MEMPAGER_SEMANTIC_FLOOR": "2",  # parses, but PagerConfig rejects it
                "MEMPAGER_DEFER_MODEL_LOAD": "maybe",
                "MEMPAGER_GATEWAY_DIM": "wide",
                "MEMPAGER_HASH_DIM": "4",  # fine for PagerConfig, too small for the hash embedder
                "MEMPAGER_ACTOR": "../etc",
                "MEMPAGER_LOG_LEVEL": "loud",
                # valid together although each alone breaks the backoff <= cap rule
                "MEMPAGER_EMBED_BACKOFF_SECONDS": "60",
                "MEMPAGER_EMBED_MAX_BACKOFF_SECONDS": "120",
                "MEMPAGER_HNSW_M": "32",
            }
        )
    )
    for env in (
        "MEMPAGER_HNSW_EF",
        "MEMPAGER_SEMANTIC_FLOOR",
        "MEMPAGER_DEFER_MODEL_LOAD",
        "MEMPAGER_GATEWAY_DIM",
        "MEMPAGER_HASH_DIM",
        "MEMPAGER_ACTOR",
        "MEMPAGER_LOG_LEVEL",
    ):
        assert rows[env].source.startswith("invalid: "), rows[env]
        assert "Traceback" not in rows[env].source
    assert "MEMPAGER_HNSW_EF" in rows["MEMPAGER_HNSW_EF"].source and rows["MEMPAGER_HNSW_EF"].value == "lots"
    assert rows["MEMPAGER_EMBED_BACKOFF_SECONDS"][1:] == (60.0, "environment")
    assert rows["MEMPAGER_EMBED_MAX_BACKOFF_SECONDS"][1:] == (120.0, "environment")
    assert rows["MEMPAGER_HNSW_M"][1:] == (32, "environment")
    assert rows["MEMPAGER_HNSW_EF_CONSTRUCTION"].source == "default"  # a longer name, not blamed

    alone = by_env(resolve({"MEMPAGER_EMBED_BACKOFF_SECONDS": "60"}))["MEMPAGER_EMBED_BACKOFF_SECONDS"]
    assert alone.source.startswith("invalid: ") and "embed_max_backoff_seconds" in alone.source
    shared = [
        r for r in resolve({"MEMPAGER_EMBED_MAX_ATTEMPTS": "0"}) if r.setting.env == "MEMPAGER_EMBED_MAX_ATTEMPTS"
    ]
    assert len(shared) == 2 and all(r.source.startswith("invalid: ") for r in shared)


def test_the_cli_default_store_is_the_tables() -> None:
    assert cli_main.DEFAULT_STORE == by_env(resolve({}))["MEMPAGER_STORE"].setting.default


def test_config_prints_every_setting_and_command_line_options_win(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("MEMPAGER_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("MEMPAGER_RETRIEVAL_TOP_K", "5")
    monkeypatch.setenv("MEMPAGER_GATEWAY_TOKEN", TOKEN)
    store = f"postgresql://agent:{PASSWORD}@db/memory"
    assert cli_main.main(["config", "--store", store, "--embedder", "hash"]) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out and PASSWORD not in out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("MEMPAGER_")}
    assert {s.env for s in settings()} == set(lines)
    assert lines["MEMPAGER_RETRIEVAL_TOP_K"] == ["MEMPAGER_RETRIEVAL_TOP_K", "5", "8", "environment"]
    assert lines["MEMPAGER_STORE"][1:] == [
        "postgresql://agent:***@db/memory",
        ".mempager/store.duckdb",
        "command",
        "line",
    ]
    assert lines["MEMPAGER_EMBEDDER"][1:] == ["hash", "auto", "command", "line"]
    assert lines["MEMPAGER_GATEWAY_TOKEN"][1:3] == ["set", "(hidden)"]

    assert cli_main.main(["config", "--json"]) == 0
    objects = json.loads(capsys.readouterr().out)
    assert len(objects) == len(settings())
    assert set(objects[0]) >= {"env", "name", "value", "default", "source", "description", "group", "secret"}
    top_k = next(o for o in objects if o["env"] == "MEMPAGER_RETRIEVAL_TOP_K")
    assert (top_k["value"], top_k["default"], top_k["source"]) == (5, 8, "environment")


PROBE = """
import json, sys
from mempager.cli.main import main
rc = main(sys.argv[1:])
loaded = sorted(m for m in ("torch", "sentence_transformers", "httpx", "hnswlib") if m in sys.modules)
print(json.dumps({"rc": rc, "loaded": loaded}), file=sys.stderr)
"""


def run_config(
    tmp_path: Path, environ: dict[str, str], *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPAGER_")} | environ
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "config", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done, json.loads(done.stderr.strip().splitlines()[-1])


def test_config_opens_no_store_and_loads_no_model(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for store in (tmp_path / "missing" / "deeper" / "agent.duckdb", locked / "agent.duckdb"):
            done, report = run_config(tmp_path, {"MEMPAGER_STORE": str(store)})
            assert report == {"rc": 0, "loaded": []}, done.stderr
            assert str(store) in done.stdout and "environment" in done.stdout
            assert not (tmp_path / "missing").exists() and not list(locked.iterdir())
            assert not (tmp_path / ".mempager").exists()
    finally:
        locked.chmod(0o700)


def test_config_reports_a_bad_value_in_one_line_and_exits_1(tmp_path: Path) -> None:
    done, report = run_config(tmp_path, {"MEMPAGER_HNSW_EF": "lots", "MEMPAGER_GATEWAY_TOKEN": TOKEN}, "--json")
    assert report["rc"] == 1
    rows = {o["env"]: o for o in json.loads(done.stdout)}
    assert rows["MEMPAGER_HNSW_EF"]["source"] == "invalid: MEMPAGER_HNSW_EF must be an integer or 'auto', got 'lots'"
    assert rows["MEMPAGER_GATEWAY_TOKEN"]["value"] == HIDDEN and TOKEN not in done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == "mempager: 1 invalid setting(s): MEMPAGER_HNSW_EF"


def test_the_table_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, mempager.settings_table, mempager.cli.config_cmd; "
        "print(sorted(m for m in ('torch', 'httpx', 'rich', 'sentence_transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_write_readme_rewrites_only_the_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n## Settings\n\n{START}\nstale\n{END}\n\n## Next\n", encoding="utf-8")
    assert main(["--write-readme", str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert readme_block(text) == markdown_table()
    assert text.startswith("# x\n\n## Settings\n\n") and text.endswith(f"{END}\n\n## Next\n")
    assert main(["--write-readme", str(readme)]) == 0 and readme.read_text(encoding="utf-8") == text
    readme.write_text("no markers\n", encoding="utf-8")
    assert main(["--write-readme", str(readme)]) == 2
    assert main([]) == 0 and capsys.readouterr().out == markdown_table()
