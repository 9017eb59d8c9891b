"""The wheel a release would ship: built from the repo, installed into a fresh virtualenv, run.

pyproject maps the folders pager/, embedders/, index/ into the one import package ``mempager``
with an explicit ``packages`` list. The editable install in .venv is a link tree of that list
(setuptools' strict mode), so the rest of the suite cannot notice a stray top-level package in
the wheel, or code that still imports ``pager``/``index``/``embedders`` by folder name.
This test builds the wheel (``python -m build --wheel --no-isolation``: there is no network), reads
it, installs it with ``pip --no-index --no-deps`` into a throw-away virtualenv and runs the package,
the ``mempager`` console script and ``python -m mempager`` from there, in a directory whose own
``index.py``, ``pager.py`` and ``embedders.py`` end the process if anything imports them.

The runtime dependencies (duckdb, numpy, httpx, hnswlib, ...) come from the interpreter running
the tests: a ``.pth`` file in the throw-away venv lists its site-packages directories. Only the
directories: ``.pth`` files inside them (the editable install's link tree) are not processed, so the
``mempager`` imported there is the wheel's, which the test checks.

Everything happens under tmp_path: the wheel is built from a copy of the sources, because
setuptools writes build/ and *.egg-info next to pyproject.toml.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
PACKAGE_DIRS = PYPROJECT["tool"]["setuptools"]["package-dir"]  # {"mempager": "pager", ...}
TIMEOUT = 300

# User modules named like the repo's folders, in the directory the installed package runs from.
SHADOWS = ("index", "pager", "embedders")
SHADOW_SOURCE = 'raise SystemExit("user module {name}.py shadowed mempager: something imported {name!r}")\n'

CHECK_SCRIPT = r"""
import importlib, importlib.metadata, importlib.resources, json, pkgutil, sys
import mempager

report = {
    "file": mempager.__file__,
    "version": mempager.__version__,
    "dist_version": importlib.metadata.version("mempager"),
    "py_typed": importlib.resources.files("mempager").joinpath("py.typed").is_file(),
    "meta_path": [type(f).__name__ if not isinstance(f, type) else f.__name__ for f in sys.meta_path],
    "imported": [["mempager", mempager.__file__]],
    "missing_optional": {},
    "shadows_loaded": [],
}
# Every module of the installed package imports, from the installed files.
for info in pkgutil.walk_packages(mempager.__path__, "mempager."):
    try:
        module = importlib.import_module(info.name)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if top in ("mempager", "index", "pager", "embedders") or not top:
            raise
        report["missing_optional"][info.name] = exc.name  # an extra's dependency not installed here
        continue
    report["imported"].append([info.name, getattr(module, "__file__", None)])
report["shadows_loaded"] = sorted(m for m in ("index", "pager", "embedders") if m in sys.modules)
print(json.dumps(report))
"""


def _expected_sources() -> set[str]:
    """Every .py file under the mapped folders, at the path it must have inside the wheel."""
    expected: set[str] = set()
    for package, folder in PACKAGE_DIRS.items():
        root = REPO / folder
        prefix = package.replace(".", "/")
        for path in root.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            expected.add(f"{prefix}/{path.relative_to(root).as_posix()}")
    return expected


def _copy_sources(dest: Path) -> Path:
    """The files setuptools reads, copied so the build writes build/ and *.egg-info outside the repo."""
    dest.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "*.so")  # *.so: the in-place build
    for name in ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in", PYPROJECT["project"]["readme"]):
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, dest / name)
    for license_file in REPO.glob("LICEN[CS]E*"):
        shutil.copy2(license_file, dest / license_file.name)
    for folder in PACKAGE_DIRS.values():
        shutil.copytree(REPO / folder, dest / folder, ignore=ignore)
    return dest


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_CACHE_DIR="1",
        PIP_NO_INPUT="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    env.update(extra)
    return env


def _run(cmd: list[str | Path], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    return done


def _outer_site_dirs() -> list[str]:
    """Where this interpreter finds mempager's runtime dependencies (not mempager itself)."""
    dirs = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return list(dict.fromkeys(d for d in dirs if Path(d).is_dir()))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build", reason="the dev extra's `build` builds the wheel")
    tmp = tmp_path_factory.mktemp("wheel")
    src = _copy_sources(tmp / "src")
    dist = tmp / "dist"
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, src], cwd=tmp, env=_clean_env())
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throw-away virtualenv holding the wheel, and the test interpreter's dependencies by .pth."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    env = _clean_env()
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=venv.parent, env=env)
    python = venv / "bin" / "python"
    # this interpreter's pip installs into the new venv: no pip bootstrap there, no index, no deps
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps", wheel],
        cwd=venv.parent,
        env=env,
    )
    purelib = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=venv.parent, env=env
    ).stdout.strip()
    (Path(purelib) / "_outer_site_packages.pth").write_text(
        "".join(f"{d}\n" for d in _outer_site_dirs()), encoding="utf-8"
    )
    return venv


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """A working directory whose own modules are named like the repo's folders."""
    for name in SHADOWS:
        (tmp_path / f"{name}.py").write_text(SHADOW_SOURCE.format(name=name), encoding="utf-8")
    return tmp_path


def test_wheel_holds_only_the_mempager_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"mempager", f"mempager-{VERSION}.dist-info"}, sorted(top)
    assert "mempager/py.typed" in names


def test_wheel_holds_every_source_file_at_its_mapped_path(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = {n for n in zf.namelist() if n.endswith(".py")}
    expected = _expected_sources()
    assert expected, "no sources found under the package-dir folders"
    missing = sorted(expected - in_wheel)
    assert not missing, f"missing from the wheel (a subpackage left out of [tool.setuptools] packages?): {missing}"
    extra = sorted(in_wheel - expected)
    assert not extra, f"in the wheel but not in the repo: {extra}"


@pytest.mark.parametrize("module", ["index/_bm25", "index/_rows", "index/_tokens", "lanes/_fuse"])
def test_wheel_holds_the_compiled_modules_and_their_types(wheel: Path, module: str) -> None:
    """index/_bm25.c, index/_rows.c, index/_tokens.c and pager/lanes/_fuse.c are built into the wheel (a platform
    wheel, then), each with its stub for type checkers."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert [n for n in names if n.startswith(f"mempager/{module}.") and n.endswith(".so")], names
    assert f"mempager/{module}.pyi" in names
    assert "-py3-none-any" not in wheel.name, wheel.name


def test_wheel_declares_the_console_script(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        entry_points = zf.read(f"mempager-{VERSION}.dist-info/entry_points.txt").decode()
    assert "mempager = mempager.cli.main:main" in entry_points


def test_installed_package_imports_from_the_venv(venv: Path, user_dir: Path) -> None:
    done = _run([venv / "bin" / "python", "-c", CHECK_SCRIPT], cwd=user_dir, env=_clean_env())
    report = json.loads(done.stdout)
    venv_root = venv.resolve()
    assert Path(report["file"]).resolve().is_relative_to(venv_root), report["file"]
    assert report["version"] == report["dist_version"] == VERSION
    assert report["py_typed"]
    assert not [f for f in report["meta_path"] if "editable" in f.lower()], report["meta_path"]
    assert report["shadows_loaded"] == []
    imported = dict(report["imported"])
    for name, file in imported.items():
        assert file and Path(file).resolve().is_relative_to(venv_root), (name, file)
    # every subpackage of pyproject's list was importable from the wheel
    for package in PYPROJECT["tool"]["setuptools"]["packages"]:
        assert package in imported or package in report["missing_optional"], package
    assert {"mempager.embedders", "mempager.index", "mempager.cli.main"} <= imported.keys()


def test_console_script_prints_the_version(venv: Path, user_dir: Path) -> None:
    done = _run([venv / "bin" / "mempager", "--version"], cwd=user_dir, env=_clean_env())
    assert done.stdout.strip() == f"mempager {VERSION}"


def test_python_dash_m_runs_the_installed_cli(venv: Path, user_dir: Path) -> None:
    done = _run([venv / "bin" / "python", "-m", "mempager", "--help"], cwd=user_dir, env=_clean_env())
    assert done.stdout.startswith("usage: mempager")
    assert "--version" in done.stdout
