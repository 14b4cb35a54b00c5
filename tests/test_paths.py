"""selfrag.paths: where the checkout's folders are, the datasets override, and the offline environment."""

import os
from pathlib import Path

from selfrag import paths


def test_in_a_checkout_the_user_facing_folders_are_used():
    root = paths.source_root()
    assert root is not None and (root / "pyproject.toml").is_file()
    assert paths.demo_corpus() == root / "data" / "demo" and (paths.demo_corpus() / "heron.md").is_file()
    assert paths.default_artifact() == root / "artifacts" / "default.json"
    assert paths.splits_dir() == root / "data" / "splits" and paths.data_dir() == root / "data"


def test_datasets_dir_is_the_env_override_else_beside_the_checkout(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.DATASETS_ENV, str(tmp_path))
    assert paths.datasets_dir() == tmp_path
    monkeypatch.delenv(paths.DATASETS_ENV)
    assert paths.datasets_dir() == paths.source_root().parent / "shared" / "datasets"


def test_offline_environment_sets_missing_defaults_and_keeps_chosen_values(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    paths.offline_environment()
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


# Migrated on another branch of the same change (issue 9); empty this set when it is merged.
NOT_YET_MIGRATED: set[str] = set()


def test_nothing_else_sets_the_environment_at_import_time():
    """The offline defaults have one home: no module of the runtime, the bench or the tests sets them."""
    root = paths.source_root()
    offenders = set()
    for folder in ("signatures", "programs", "optimize", "selfrag", "bench", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            if path in (Path(paths.__file__), Path(__file__)):
                continue
            text = path.read_text(encoding="utf-8")
            if "os.environ.setdefault(" in text or "noqa: E402" in text:
                offenders.add(path.relative_to(root).as_posix())
    assert offenders - NOT_YET_MIGRATED == set(), "use selfrag.paths.offline_environment() at the entry point"
