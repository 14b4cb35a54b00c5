"""selfrag.settings.resolve: pydantic-settings precedence for every section, the TOML file choice, and
one-line ConfigErrors for every way a setting can be wrong."""

import os

import pytest

from selfrag.errors import ConfigError
from selfrag.settings import Settings, resolve


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("SELFRAG_")]:
        monkeypatch.delenv(name)
    return tmp_path


def test_flags_env_and_toml_merge_within_each_section(workdir, monkeypatch):
    (workdir / "selfrag.toml").write_text(
        '[kb]\ncollection = "file"\nchunk_overlap = 10\nchunk_size = 300\n'
        '[retrieval]\nk = 7\n[web]\nmax_results = 5\n[program]\nmax_rewrites = 2\nk = 4\n'
    )
    monkeypatch.setenv("SELFRAG_KB__CHUNK_SIZE", "500")
    monkeypatch.setenv("SELFRAG_PROGRAM__K", "5")
    s = resolve({"kb": {"collection": "flag", "chunker": None}, "program": {"max_candidates": 2}})
    assert (s.kb.collection, s.kb.chunk_size, s.kb.chunk_overlap) == ("flag", 500, 10)
    assert (s.program.k, s.program.max_rewrites, s.program.max_candidates) == (5, 2, 2)
    assert s.kb.chunker == "recursive"  # a None flag is no override
    assert s.retrieval.k == 7 and s.web.max_results == 5


def test_every_section_is_read_from_the_file(workdir, tmp_path):
    """No section is dropped on the way (a new section needs no second list to be resolved)."""
    (workdir / "selfrag.toml").write_text(
        f'program_path = "{tmp_path / "a.json"}"\n[kb]\ncollection = "c1"\n[retrieval]\nmode = "bm25"\n'
        '[lm]\nprofile = "tiny"\n[program]\nmax_web_rounds = 0\n[web]\nretries = 0\n[cache]\nanswers = false\n'
    )
    s = resolve({"lm": {"threads": 1}})
    assert set(Settings.model_fields) == {"kb", "retrieval", "lm", "program", "web", "cache", "service",
                                         "program_path"}
    assert s.cache.answers is False
    assert (s.kb.collection, s.retrieval.mode, s.lm.profile, s.program.max_web_rounds, s.web.retries) == (
        "c1", "bm25", "tiny", 0, 0)
    assert s.program_path == tmp_path / "a.json" and s.lm.threads == 1


def test_resolve_leaves_the_environment_alone(workdir, tmp_path):
    cfg = tmp_path / "other.toml"
    cfg.write_text('[lm]\nprofile = "tiny"\n')
    before = dict(os.environ)
    assert resolve(config_file=cfg).lm.profile == "tiny"
    assert dict(os.environ) == before


def test_selfrag_config_selects_the_file_and_config_flag_wins(workdir, tmp_path, monkeypatch):
    (tmp_path / "env.toml").write_text('[kb]\ncollection = "from-env-file"\n')
    (tmp_path / "flag.toml").write_text('[kb]\ncollection = "from-flag-file"\n')
    (workdir / "selfrag.toml").write_text('[kb]\ncollection = "from-cwd"\n')
    monkeypatch.setenv("SELFRAG_CONFIG", str(tmp_path / "env.toml"))
    assert resolve().kb.collection == "from-env-file"
    assert resolve(config_file=tmp_path / "flag.toml").kb.collection == "from-flag-file"


@pytest.mark.parametrize("where", ["missing", "folder"])
def test_selfrag_config_must_name_a_file(workdir, tmp_path, monkeypatch, where):
    target = tmp_path / "nope.toml" if where == "missing" else tmp_path
    monkeypatch.setenv("SELFRAG_CONFIG", str(target))
    with pytest.raises(ConfigError, match="SELFRAG_CONFIG") as err:
        resolve()
    assert str(target) in str(err.value) and err.value.exit_code == 2


def test_config_flag_must_name_a_file(workdir, tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        resolve(config_file=tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="is not a file"):
        resolve(config_file=tmp_path)


def test_malformed_toml_names_file_line_and_problem(workdir):
    (workdir / "selfrag.toml").write_text('[lm]\nprofile = "tiny"\nthreads = = 2\n')
    with pytest.raises(ConfigError) as err:
        resolve()
    message = str(err.value)
    assert message.startswith("selfrag.toml: invalid TOML:") and "line 3" in message and "\n" not in message
    assert err.value.exit_code == 2


def test_unknown_keys_are_named(workdir):
    (workdir / "selfrag.toml").write_text('[kb]\ncolection = "x"\n[bogus]\na = 1\n')
    with pytest.raises(ConfigError) as err:
        resolve()
    assert str(err.value) == "invalid settings: kb.colection: unknown key; bogus: unknown key"
    with pytest.raises(ConfigError, match="lm.temprature: unknown key"):
        resolve({"lm": {"temprature": 1.0}}, config_file=None)


def test_bad_values_name_their_key_whatever_the_source(workdir, monkeypatch):
    monkeypatch.setenv("SELFRAG_KB__PORT", "not-a-port")
    with pytest.raises(ConfigError, match=r"^invalid settings: kb\.port: "):
        resolve()
    monkeypatch.delenv("SELFRAG_KB__PORT")
    (workdir / "selfrag.toml").write_text("[retrieval]\nk = 0\n")
    with pytest.raises(ConfigError, match=r"retrieval\.k: Input should be greater than or equal to 1"):
        resolve()


def test_plain_settings_reads_the_same_file_as_resolve(workdir, tmp_path, monkeypatch):
    (tmp_path / "env.toml").write_text('[kb]\ncollection = "from-env-file"\n')
    monkeypatch.setenv("SELFRAG_CONFIG", str(tmp_path / "env.toml"))
    assert Settings().kb.collection == resolve().kb.collection == "from-env-file"


def test_rerank_judge_without_logprobs_is_one_config_error_naming_both_keys(workdir, monkeypatch):
    monkeypatch.setenv("SELFRAG_PROGRAM__RERANK", "judge")
    with pytest.raises(ConfigError) as err:
        resolve({"lm": {"logprobs": False}})
    message = str(err.value)
    assert "\n" not in message and "program.rerank" in message and "lm.logprobs" in message
    assert resolve({"lm": {"logprobs": True}}).program.rerank == "judge"
    assert resolve({"lm": {"logprobs": False}, "program": {"rerank": "auto"}}).program.rerank == "auto"
