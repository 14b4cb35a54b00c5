"""The layers import downward: ``signatures`` → ``programs`` never reach into the runtime (``selfrag``).

Checked twice: statically (no ``import selfrag…`` anywhere in their source, deferred imports included)
and at run time (a fresh interpreter that imports every module of both packages and the programs
loads no runtime module and none of the runtime's heavy dependencies).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOWER_LAYERS = ("signatures", "programs")
FORBIDDEN = ("selfrag", "chromadb", "tavily", "llama_cpp")

PROBE = """
import importlib, json, pkgutil, sys
import programs, signatures
for package in (signatures, programs):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
from programs import SelfRAG, CorrectiveRAG, VanillaRAG, NoRetrieval, GradedRAG, RAGModule
from programs.registry import program_class, PROGRAM_NAMES
for name in PROGRAM_NAMES:
    program_class(name)
print(json.dumps(sorted(sys.modules)))
"""


def imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_lower_layer_source_imports_the_runtime():
    offenders = {
        f"{path.relative_to(ROOT)}: {name}"
        for layer in LOWER_LAYERS
        for path in (ROOT / layer).rglob("*.py")
        for name in imported_names(path)
        if name.split(".")[0] == "selfrag"
    }
    assert not offenders, sorted(offenders)


def test_a_fresh_interpreter_loads_no_runtime_module_with_the_programs():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "programs.selfrag" in loaded and "signatures" in loaded  # the probe did import them
    leaked = sorted(m for m in loaded if m.split(".")[0] in FORBIDDEN)
    assert not leaked, leaked


def test_importing_programs_alone_is_cheap():
    code = "import json, sys, programs.settings; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "dspy" not in loaded and "programs.selfrag" not in loaded
