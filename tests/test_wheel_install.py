"""A non-editable install works away from the checkout: build the wheel, install it into a folder, and
from another folder import that copy (not the checkout), find the demo corpus and the default artifact
as package data, and answer with `ask --profile tiny` (SmolLM2 in llama.cpp: plumbing, not quality)."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from selfrag import paths

pytest.importorskip("llama_cpp", reason="the local extra (llama-cpp-python) is not installed")

PROBE = """
import json, selfrag
from selfrag import paths
from selfrag.settings import resolve
from selfrag.wiring import build_runtime
runtime = build_runtime(resolve(), lms=(None, None, None), demo=True)
sources = {m["source"] for _, _, m in runtime.kb.store.iter_all(include_sources_only=True)}
print(json.dumps({
    "package": selfrag.__file__, "source_root": paths.source_root() and str(paths.source_root()),
    "demo": str(paths.demo_corpus()), "artifact": str(paths.default_artifact()),
    "ingested_demo": runtime.ingested_demo, "sources": sorted(sources),
    "support_demos": len(runtime.program.judge_support.demos),
}))
"""


def _copy_sources(root: Path, dest: Path) -> dict:
    """What the build reads (pyproject.toml, README.md, the packages and their data folders), into ``dest``:
    an in-tree build writes build/ and *.egg-info, which must not land in the checkout."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {name.split(".")[0] for name in config["packages"]} | set(config["package-dir"].values())
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(root / name, dest / name)
    for folder in sorted(folders):
        shutil.copytree(root / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return config


@pytest.mark.slow
def test_wheel_install_finds_its_package_data_and_answers(tmp_path):
    root = paths.source_root()
    assert root is not None, "this test builds the wheel from the checkout"
    src, wheels, target, elsewhere = (tmp_path / d for d in ("src", "wheels", "site", "elsewhere"))
    for d in (src, wheels, elsewhere):
        d.mkdir()
    config = _copy_sources(root, src)
    python = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*python, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("selfrag-*.whl")

    code_dirs = {name.split(".")[0] for name in config["packages"] if not name.startswith("selfrag._data")}
    modules = {p.relative_to(root).as_posix() for d in code_dirs for p in (root / d).rglob("*.py")}
    names = set(zipfile.ZipFile(wheel).namelist())
    assert modules - names == set(), "modules missing from the wheel: list their package in pyproject.toml"
    assert {"selfrag/_data/demo/heron.md", "selfrag/_data/artifacts/default.json"} <= names

    subprocess.run([*python, "install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target), "SELFRAG_KB__EMBEDDING_MODEL": "hash",
           "SELFRAG_KB__PATH": str(elsewhere / "kb-probe")}
    env.pop("SELFRAG_CONFIG", None)
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=elsewhere,
                           timeout=300)
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout)
    installed = target / "selfrag"
    assert Path(found["package"]).parent == installed and found["source_root"] is None
    assert Path(found["demo"]) == installed / "_data" / "demo"
    assert Path(found["artifact"]) == installed / "_data" / "artifacts" / "default.json"
    assert found["ingested_demo"] and any(s.endswith("/_data/demo/heron.md") for s in found["sources"])
    assert all(s.startswith(str(installed)) for s in found["sources"])
    assert found["support_demos"] > 0  # the shipped artifact's compiled demos were loaded

    # the installed CLI end to end; `--retrieve never` keeps it to two tiny-model calls (the retrieval path
    # from a checkout is tests/cli/test_ask_tiny_e2e.py), the demo corpus is still ingested on first use into
    # the default knowledge base (the default collection at the default path, under the working directory)
    env.pop("SELFRAG_KB__PATH")
    env.update({"SELFRAG_LM__THREADS": "2"})
    ask = subprocess.run(
        [sys.executable, "-m", "selfrag.cli.app", "ask", "--profile", "tiny", "--retrieve", "never",
         "What is the range of the Heron cargo bike?", "--json"],
        capture_output=True, text=True, env=env, cwd=elsewhere, timeout=600,
    )
    assert ask.returncode == 0, ask.stderr[-3000:]
    assert "ingested the demo corpus" in ask.stderr  # status lines go to stderr: stdout is only the JSON
    result = json.loads(ask.stdout[ask.stdout.index("{"):])
    assert result["trace"] and result["usage"]["lm_calls"] > 0
    assert result["abstained"] or result["answer"]
