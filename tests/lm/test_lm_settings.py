"""LMSettings precedence through selfrag.settings.resolve: CLI > env > TOML > default."""

import pytest

from selfrag.settings import resolve


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SELFRAG_CONFIG", "SELFRAG_LM__PROFILE", "SELFRAG_LM__MODEL", "SELFRAG_LM__THREADS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_default_profile_is_local(workdir):
    assert resolve().lm.profile == "local"


def test_toml_beats_default(workdir):
    (workdir / "selfrag.toml").write_text('[lm]\nprofile = "tiny"\nthreads = 1\n')
    lm = resolve().lm
    assert lm.profile == "tiny" and lm.threads == 1


def test_env_beats_toml(workdir, monkeypatch):
    (workdir / "selfrag.toml").write_text('[lm]\nprofile = "tiny"\nthreads = 1\n')
    monkeypatch.setenv("SELFRAG_LM__PROFILE", "local")
    lm = resolve().lm
    assert lm.profile == "local"
    assert lm.threads == 1  # keys the env does not set still come from the file


def test_cli_beats_env(workdir, monkeypatch):
    (workdir / "selfrag.toml").write_text('[lm]\nprofile = "tiny"\n')
    monkeypatch.setenv("SELFRAG_LM__PROFILE", "local")
    lm = resolve({"lm": {"profile": "litellm", "model": "openai/gpt-4o-mini", "threads": None}}).lm
    assert lm.profile == "litellm" and lm.model == "openai/gpt-4o-mini"


def test_explicit_config_file(workdir, tmp_path):
    cfg = tmp_path / "other.toml"
    cfg.write_text(
        '[lm]\nprofile = "litellm"\nmodel = "ollama_chat/llama3.1"\napi_base = "http://localhost:11434"\n'
    )
    lm = resolve(config_file=cfg).lm
    assert (lm.profile, lm.model, lm.api_base) == (
        "litellm",
        "ollama_chat/llama3.1",
        "http://localhost:11434",
    )


def test_invalid_lm_values_are_refused(workdir):
    with pytest.raises(ValueError):
        resolve({"lm": {"profile": "gpt"}})
    with pytest.raises(ValueError, match="needs lm.model"):
        resolve({"lm": {"profile": "litellm"}})
