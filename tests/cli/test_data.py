"""`selfrag data build` / `data verify` through typer's CliRunner (a hashed bag-of-words embedder stands in
for MiniLM), and their one-line errors."""

import pytest
from typer.testing import CliRunner

from selfrag import paths
from selfrag.cli.app import app
from tests.optimize.test_splits import hash_embed

runner = CliRunner()
DATASETS = paths.datasets_dir()
needs_datasets = pytest.mark.skipif(not (DATASETS / "clapnq").is_dir(), reason="shared datasets not present")


@needs_datasets
def test_build_writes_the_splits_and_verify_checks_them(tmp_path, monkeypatch):
    monkeypatch.setattr("optimize.negatives.minilm_embed", hash_embed)
    out = tmp_path / "splits"
    result = runner.invoke(app, ["data", "build", "--datasets", str(DATASETS), "--out", str(out), "--limit", "12"])
    assert result.exit_code == 0, result.output
    assert "qa_en/train.jsonl" in result.output and "dataset_hash" in result.output
    assert (out / "manifest.json").is_file() and (out / "support" / "dev.jsonl").is_file()

    ok = runner.invoke(app, ["data", "verify", "--splits", str(out)])
    assert ok.exit_code == 0 and "ok" in ok.output
    (out / "support" / "dev.jsonl").write_text("{}\n")
    bad = runner.invoke(app, ["data", "verify", "--splits", str(out)])
    assert bad.exit_code == 1 and "mismatch: support/dev.jsonl" in bad.output


def test_build_refuses_a_missing_datasets_folder(tmp_path):
    result = runner.invoke(app, ["data", "build", "--datasets", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "datasets folder not found" in result.output and "Traceback" not in result.output


def test_build_refuses_a_folder_without_the_datasets(tmp_path):
    result = runner.invoke(app, ["data", "build", "--datasets", str(tmp_path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "clapnq" in result.output


def test_verify_without_a_manifest_is_a_one_line_error(tmp_path):
    result = runner.invoke(app, ["data", "verify", "--splits", str(tmp_path)])
    assert result.exit_code == 2 and "selfrag data build" in " ".join(result.output.split())


def test_data_lists_its_commands():
    result = runner.invoke(app, ["data", "--help"])
    assert result.exit_code == 0 and "build" in result.output and "verify" in result.output


@pytest.mark.parametrize("command", [["data", "build"], ["data", "verify"], ["compile"], ["eval"]])
def test_every_command_takes_a_config_file(command, tmp_path):
    result = runner.invoke(app, [*command, "-c", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2 and "nope.toml" in " ".join(result.output.split())
