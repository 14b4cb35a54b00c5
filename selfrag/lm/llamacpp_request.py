"""Translate a ``dspy.lm15.Request`` into ``Llama.create_chat_completion`` arguments.

A ``json_schema`` response format becomes llama.cpp's ``{"type": "json_object", "schema": ...}``:
decoding is constrained by a grammar built from the schema (Literal outputs become enums the model
cannot leave). ``config.logprobs`` (an int: how many top alternatives per token; DSPy sets it from
``dspy.LM(..., logprobs=True, top_logprobs=K)``) is read by :func:`requested_logprobs`; the engine
captures them itself (see :mod:`selfrag.lm.llamacpp_logprobs`), so it is not passed to llama.cpp.

llama.cpp's grammar parser refuses a repetition deeper than about a thousand (llama-cpp-python writes
``maxLength: N`` as N nested optional groups), and llama-cpp-python then crashes the process on the missing
sampler. So a ``maxLength`` / ``maxItems`` above :data:`MAX_GRAMMAR_BOUND` is lowered to it (a tighter bound
still satisfies the schema), and a schema is used only when llama.cpp's own parser takes its grammar; else
decoding falls back to any JSON, with a warning.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

from dspy import lm15
from dspy.lm15 import Request

from selfrag.lm.llamacpp_model import PROVIDER

logger = logging.getLogger(__name__)

# The deepest maxLength / maxItems llama.cpp's grammar parser takes (measured: 1,000 parses, 1,050 does not).
MAX_GRAMMAR_BOUND = 1000
_BOUND_KEYS = ("maxLength", "maxItems")


def _text_of(parts, where: str) -> str:
    texts = []
    for part in parts:
        kind = getattr(part, "type", None)
        if kind == "text":
            texts.append(part.text)
        elif kind == "thinking":
            continue  # earlier reasoning is not replayed to a local model
        else:
            raise lm15.UnsupportedFeatureError(
                f"the llama.cpp engine takes text only; {where} has a {kind!r} part",
                feature=str(kind),
                provider=PROVIDER,
            )
    return "\n".join(texts)


def to_chat_messages(request: Request) -> list[dict[str, str]]:
    """The request as OpenAI-style chat messages for ``Llama.create_chat_completion``."""
    messages: list[dict[str, str]] = []
    if request.system is not None:
        system = (
            request.system
            if isinstance(request.system, str)
            else _text_of(request.system, "the system prompt")
        )
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        role = {"developer": "system"}.get(message.role, message.role)
        if role not in ("system", "user", "assistant"):
            raise lm15.UnsupportedFeatureError(
                f"the llama.cpp engine does not take {message.role!r} messages",
                feature=message.role,
                provider=PROVIDER,
            )
        messages.append({"role": role, "content": _text_of(message.parts, f"a {message.role} message")})
    return messages


def within_grammar_bounds(schema: Any) -> Any:
    """``schema`` with every ``maxLength`` / ``maxItems`` above :data:`MAX_GRAMMAR_BOUND` lowered to it."""
    if isinstance(schema, dict):
        out = {k: within_grammar_bounds(v) for k, v in schema.items()}
        for key in _BOUND_KEYS:
            if isinstance(out.get(key), int) and out[key] > MAX_GRAMMAR_BOUND:
                out[key] = MAX_GRAMMAR_BOUND
        return out
    if isinstance(schema, list):
        return [within_grammar_bounds(v) for v in schema]
    return schema


@functools.lru_cache(maxsize=64)
def _schema_compiles(schema_json: str) -> bool:
    """Whether llama.cpp turns the schema into a grammar its own parser takes (llama-cpp-python's converter
    accepts more than the parser does, and a grammar the parser refuses crashes the process at sampling)."""
    try:
        import llama_cpp
        from llama_cpp.llama_grammar import json_schema_to_gbnf
    except ImportError:
        return True  # a fake Llama in tests; nothing to check against
    try:
        gbnf = json_schema_to_gbnf(schema_json)
    except Exception as exc:  # noqa: BLE001 - any converter failure means "no schema grammar"
        logger.warning(
            "llama.cpp cannot compile this JSON schema to a grammar (%s); decoding any JSON instead", exc
        )
        return False
    sampler = llama_cpp.llama_sampler_init_grammar(None, gbnf.encode("utf-8"), b"root")  # parse only: no vocab
    if not sampler:
        logger.warning("llama.cpp's grammar parser refuses this JSON schema's grammar; decoding any JSON instead")
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def to_llama_response_format(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """lm15's ``response_format`` as llama-cpp-python's: ``json_schema`` -> ``json_object`` + ``schema``."""
    if response_format is None:
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = within_grammar_bounds(response_format["schema"])
        if _schema_compiles(json.dumps(schema, sort_keys=True)):
            return {"type": "json_object", "schema": schema}
        return {"type": "json_object"}
    raise lm15.UnsupportedFeatureError(
        f"unsupported response_format type {kind!r}", feature="response_format"
    )


def completion_kwargs(
    request: Request, *, default_max_tokens: int, default_temperature: float, seed: int
) -> dict[str, Any]:
    """``create_chat_completion`` keyword arguments for the request's config."""
    config = request.config
    if request.tools or config.tool_choice is not None:
        raise lm15.UnsupportedFeatureError(
            "the llama.cpp engine does not do tool calling", feature="tools", provider=PROVIDER
        )
    if config.probabilities is not None:
        raise lm15.UnsupportedFeatureError(
            "the llama.cpp engine does not measure judgment probabilities (config.probabilities); "
            "ask for token logprobs instead",
            feature="probabilities",
            provider=PROVIDER,
        )
    kwargs: dict[str, Any] = {
        "temperature": default_temperature if config.temperature is None else config.temperature,
        "max_tokens": default_max_tokens if config.max_tokens is None else config.max_tokens,
        "seed": seed if config.seed is None else config.seed,
    }
    if config.top_p is not None:
        kwargs["top_p"] = config.top_p
    if config.top_k is not None:
        kwargs["top_k"] = config.top_k
    if config.stop:
        kwargs["stop"] = list(config.stop)
    if config.frequency_penalty is not None:
        kwargs["frequency_penalty"] = config.frequency_penalty
    if config.presence_penalty is not None:
        kwargs["presence_penalty"] = config.presence_penalty
    response_format = to_llama_response_format(config.response_format)
    if response_format is not None:
        kwargs["response_format"] = response_format
    return kwargs


def requested_logprobs(request: Request) -> int | None:
    """How many top alternatives per token the request asks for (0: the chosen token only), or None."""
    return request.config.logprobs
