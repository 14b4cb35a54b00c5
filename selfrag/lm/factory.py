"""Build the DSPy LM and adapter a profile asks for. Swapping backends is a settings change only.

- ``local`` / ``tiny``: a GGUF run in process by :class:`LlamaCppEngine` (``lm.model`` may name any
  ``.gguf`` file instead of the profile's model). Nothing is loaded until the first call.
- ``litellm``: a plain ``dspy.LM(lm.model, api_base=...)``; API keys come from the environment
  (``OPENAI_API_KEY``, ...) as LiteLLM reads them, never from the TOML file.

``role="critic"`` uses ``lm.critic_model`` when set: a ``.gguf`` path runs in process, anything else is a
LiteLLM model string (with ``lm.api_base``).

Token log-probabilities (for soft judgement scores, :mod:`programs.soft_labels`) are asked for with
``logprobs=True, top_logprobs=K``: every call of the LM then returns them and a ``dspy.Predict``'s
prediction carries them as ``pred.logprobs``. The in-process engine always can; a LiteLLM model gets
them only when LiteLLM lists ``logprobs`` among the model's supported parameters (providers such as
Anthropic refuse the parameter), otherwise they are left off and judgements fall back to hard labels.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import dspy

from selfrag.lm.llamacpp_engine import AsyncLlamaCppEngine, LlamaCppEngine
from selfrag.lm.model_files import gguf_path
from selfrag.settings import LMSettings

logger = logging.getLogger(__name__)

Role = Literal["generator", "critic"]
ENGINE_PREFIX = "llamacpp/"


def _is_gguf(model: str | None) -> bool:
    return bool(model) and Path(model).suffix.lower() == ".gguf"


DEFAULT_TOP_LOGPROBS = 5


def logprob_kwargs(logprobs: bool, top_logprobs: int) -> dict[str, object]:
    """The ``dspy.LM`` keyword arguments that ask every call for token log-probabilities."""
    if top_logprobs < 0 or top_logprobs > 20:
        raise ValueError(f"top_logprobs must be between 0 and 20, got {top_logprobs}")
    return {"logprobs": True, "top_logprobs": int(top_logprobs)} if logprobs else {}


def engine_lm(
    path: Path, lm: LMSettings, *, logprobs: bool = True, top_logprobs: int = DEFAULT_TOP_LOGPROBS
) -> dspy.LM:
    """A ``dspy.LM`` backed by the in-process llama.cpp engine for the GGUF at ``path``."""
    engine = LlamaCppEngine(
        path,
        n_ctx=lm.n_ctx,
        n_threads=lm.threads,
        timeout=lm.timeout,
        max_tokens=lm.max_tokens,
        temperature=lm.temperature,
        ram_cache_mb=lm.ram_cache_mb,
    )
    # num_retries=0: a local failure (timeout, context overflow) is not transient; retrying only
    # repeats the work. The SelfRAG program records the failure of a judgement and carries on.
    return dspy.LM(
        ENGINE_PREFIX + Path(path).stem,
        engine=engine,
        async_engine=AsyncLlamaCppEngine(engine),
        temperature=lm.temperature,
        max_tokens=lm.max_tokens,
        cache=lm.cache,
        num_retries=0,
        **logprob_kwargs(logprobs, top_logprobs),
    )


def litellm_lm(
    model: str, lm: LMSettings, *, logprobs: bool = True, top_logprobs: int = DEFAULT_TOP_LOGPROBS
) -> dspy.LM:
    """A LiteLLM-routed ``dspy.LM``; credentials come from the environment only."""
    kwargs: dict[str, object] = {}
    if lm.api_base:
        kwargs["api_base"] = lm.api_base
    wanted = logprob_kwargs(logprobs, top_logprobs)
    if wanted and not _supports_logprobs(model):
        logger.info("%s: LiteLLM lists no logprobs support; judgements fall back to hard labels", model)
        wanted = {}
    return dspy.LM(
        model,
        temperature=lm.temperature,
        max_tokens=lm.max_tokens,
        cache=lm.cache,
        timeout=lm.timeout,
        **kwargs,
        **wanted,
    )


def _supports_logprobs(model: str) -> bool:
    """Whether LiteLLM says the model takes ``logprobs`` (its offline model table; no network)."""
    try:
        import litellm

        params = litellm.get_supported_openai_params(model=model) or ()
    except Exception as exc:  # noqa: BLE001 - an unknown provider or model: do not ask for logprobs
        logger.debug("no LiteLLM parameter list for %s: %s", model, exc)
        return False
    return "logprobs" in params


def build_lm(
    lm: LMSettings,
    role: Role = "generator",
    *,
    logprobs: bool = True,
    top_logprobs: int = DEFAULT_TOP_LOGPROBS,
) -> dspy.LM:
    """The LM for ``role`` under settings ``lm`` (no model is loaded here).

    ``logprobs``/``top_logprobs`` ask every call for token log-probabilities with that many top
    alternatives (meant to come from the settings ``lm.logprobs`` / ``lm.top_logprobs``).
    """
    if role not in ("generator", "critic"):
        raise ValueError(f"role must be 'generator' or 'critic', got {role!r}")
    lp = {"logprobs": logprobs, "top_logprobs": top_logprobs}
    if role == "critic" and lm.critic_model:
        if _is_gguf(lm.critic_model):
            return engine_lm(gguf_path("local", lm.critic_model), lm, **lp)
        return litellm_lm(lm.critic_model, lm, **lp)
    if lm.profile == "litellm":
        assert lm.model  # enforced by LMSettings
        return litellm_lm(lm.model, lm, **lp)
    return engine_lm(gguf_path(lm.profile, lm.model, lm.model_cache), lm, **lp)


def forget_prompts(*lms: dspy.LM | None) -> None:
    """Make the next call of each in-process ``lms`` evaluate its whole prompt
    (:meth:`LlamaCppEngine.forget_prompts`); a LiteLLM model keeps no prompt state here and is skipped."""
    for lm in lms:
        forget = getattr(getattr(lm, "engine", None), "forget_prompts", None)
        if callable(forget):
            forget()


def build_adapter(lm: LMSettings) -> dspy.Adapter:
    """A JSON adapter for every profile: :class:`CompactJSONAdapter` (``lm.adapter = "compact"``, the
    default) or ``dspy.JSONAdapter`` (``"json"``); both parse the same way and send the same output schema,
    except that JSONAdapter drops field bounds (``max_length``): with it the local engine's grammar does not
    cut a run-on answer or list (:mod:`programs.answer_length`), and such a reply may run out of tokens.

    In process it is the only sensible choice: the engine turns the signature's output schema into a
    grammar, so a Literal output can only be one of its values and the reply always parses. Through
    LiteLLM, JSONAdapter uses the provider's structured outputs when the model supports them and JSON
    mode otherwise, and keeps one prompt format across backends so a compiled program's instructions and
    demos transfer when the backend changes (ChatAdapter would also fall back to JSONAdapter on a parse
    failure, at the price of a second call).
    """
    from selfrag.lm.compact_adapter import CompactJSONAdapter

    return CompactJSONAdapter() if lm.adapter == "compact" else dspy.JSONAdapter()
