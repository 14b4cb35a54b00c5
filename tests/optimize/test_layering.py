"""optimize/ sits below the runtime: it never imports ``selfrag`` (not even inside a function) and
reads no environment; the command line injects what it needs."""

import ast
import subprocess
import sys
from pathlib import Path

OPTIMIZE = Path(__file__).resolve().parents[2] / "optimize"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_no_module_of_optimize_imports_the_runtime_or_reads_the_environment():
    files = sorted(OPTIMIZE.glob("*.py"))
    assert len(files) > 5
    for path in files:
        assert not [n for n in _imports(path) if n == "selfrag" or n.startswith("selfrag.")], path.name
        text = path.read_text(encoding="utf-8")
        assert "os.environ" not in text and "getenv" not in text and "__file__" not in text, path.name


def test_importing_optimize_loads_no_runtime_module():
    modules = [f"optimize.{p.stem}" for p in sorted(OPTIMIZE.glob("*.py")) if p.stem != "__init__"]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(sorted(m for m in sys.modules if m == 'selfrag' or m.startswith('selfrag.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=OPTIMIZE.parent, env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
                                                   "PATH": "/usr/bin:/bin"}).stdout
    assert out.strip() == "[]"
