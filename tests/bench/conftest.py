"""The bench scripts (bench/*.py) imported as modules for their tests."""

import importlib
import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parents[2] / "bench")


def import_bench(name: str):
    """The bench script ``bench/<name>.py`` as a module (it imports its sibling scripts by name)."""
    sys.path.insert(0, BENCH)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(BENCH)
