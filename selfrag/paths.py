"""Where things are, and the process environment — the one module that knows either.

Paths: the bundled demo corpus and the shipped default artifact are package data (found in a
non-editable install too); the derived splits and the public datasets are found from the source tree
or the environment. :func:`offline_environment` sets the offline-safe library defaults and is called
by the entry points only (the CLI, the test configuration, the bench scripts), never at import time.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

DATASETS_ENV = "SELFRAG_DATASETS"

# The source checkout, when running from one (None in a wheel install without the repo layout).
_SOURCE_ROOT = Path(__file__).resolve().parents[1]

_OFFLINE_DEFAULTS = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # else `import litellm` fetches a price map from the network
    "HF_HUB_OFFLINE": "1",  # models ship inside wheels; never reach for a hub
    "TOKENIZERS_PARALLELISM": "false",
    "ANONYMIZED_TELEMETRY": "False",  # chromadb
}


def offline_environment() -> None:
    """Offline-safe defaults for libraries that otherwise phone home at import time (kept if set)."""
    for key, value in _OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)


def source_root() -> Path | None:
    """The project checkout this package runs from, or None when installed without it."""
    root = _SOURCE_ROOT
    return root if (root / "pyproject.toml").is_file() and (root / "programs").is_dir() else None


def _package_data(*parts: str) -> Path:
    return Path(str(resources.files("selfrag").joinpath("_data", *parts)))


def demo_corpus() -> Path:
    """The bundled demo corpus folder (``data/demo`` in the checkout, package data when installed)."""
    root = source_root()
    if root is not None and (root / "data" / "demo").is_dir():
        return root / "data" / "demo"
    return _package_data("demo")


def default_artifact() -> Path:
    """The shipped default compiled artifact (may not exist)."""
    root = source_root()
    if root is not None and (root / "artifacts").is_dir():
        return root / "artifacts" / "default.json"
    return _package_data("artifacts", "default.json")


def splits_dir() -> Path:
    """The derived labelled splits (``data/splits`` of the checkout, or the working directory's)."""
    root = source_root()
    return (root if root is not None else Path.cwd()) / "data" / "splits"


def artifacts_dir() -> Path:
    """Where compiled artifacts go by default: ``artifacts/`` of the checkout, else of the working directory."""
    root = source_root()
    return (root if root is not None else Path.cwd()) / "artifacts"


def data_dir() -> Path:
    """The project's ``data/`` folder (derived files, attribution)."""
    return splits_dir().parent


def datasets_dir() -> Path:
    """The public labelled datasets: ``$SELFRAG_DATASETS``, else ``../shared/datasets`` beside the checkout."""
    env = os.environ.get(DATASETS_ENV)
    if env:
        return Path(env)
    root = source_root() or Path.cwd()
    return root.parent / "shared" / "datasets"
