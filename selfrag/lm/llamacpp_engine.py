"""A DSPy 3.4 custom engine that runs a GGUF model in process with llama-cpp-python.

Use it as ``dspy.LM("llamacpp/<name>", engine=LlamaCppEngine(path), num_retries=0)``.

- The engine implements DSPy's canonical contract (``complete(Request) -> Response``, ``stream``,
  ``close``; see ``dspy/clients/engines/base.py``) and declares ``supports_response_schema`` so
  ``dspy.JSONAdapter`` sends the signature's output schema, which becomes a decoding grammar
  (:mod:`selfrag.lm.llamacpp_request`).
- The model is shared per process and its calls are serialised (:mod:`selfrag.lm.llamacpp_model`).
- **Token usage** per call, in ``Response.usage`` (DSPy's usage dict, ``lm.history[i]["usage"]`` and
  ``Prediction.get_lm_usage()`` under ``track_usage``, in brackets): ``input_tokens``
  (``prompt_tokens``), ``output_tokens`` (``completion_tokens``) and ``cache_read_tokens``
  (``prompt_tokens_details.cached_tokens``, as OpenAI reports it): the prompt tokens llama.cpp did not
  evaluate because its KV cache (the previous call's prefix, or a ``ram_cache_mb`` entry) already
  held them. ``prompt_tokens - cached_tokens`` were evaluated. ``engine.last`` / ``engine.stats`` hold
  the same per call and summed, with timings.
- **Log-probabilities**: when the request carries ``config.logprobs = K`` (DSPy sets it from
  ``dspy.LM(..., logprobs=True, top_logprobs=K)`` or a call's ``config``), ``Response.logprobs`` holds
  one ``TokenLogprob`` per generated token (its string, log-probability and the top-K *raw,
  pre-grammar* alternatives; :mod:`selfrag.lm.llamacpp_logprobs`), and DSPy hands them to the caller
  as ``prediction.logprobs == {"content": [{token, logprob, bytes, top_logprobs: [...]}]}``.
- Failures are raised as ``dspy.lm15`` errors (timeout, context length, unsupported feature,
  configuration, server) so DSPy records them; the LM should be built with ``num_retries=0``
  because a local failure is not a transient network error.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspy import lm15
from dspy.clients.engines.base import validate_request
from dspy.lm15 import Message, Request, Response, TextPart, TokenLogprob, Usage, response_to_events

from selfrag.lm.llamacpp_logprobs import LogprobCapture
from selfrag.lm.llamacpp_model import PROVIDER, LoadedModel, _Deadline, get_model, loaded_model
from selfrag.lm.llamacpp_request import completion_kwargs, requested_logprobs, to_chat_messages

logger = logging.getLogger(__name__)

_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_call", "function_call": "tool_call"}


@dataclass
class CallStats:
    """What one completion cost. ``prompt_evaluated`` < ``prompt_tokens`` when the KV cache was reused."""

    prompt_tokens: int = 0
    prompt_evaluated: int | None = None
    completion_tokens: int = 0
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0
    wait_seconds: float = 0.0
    total_seconds: float = 0.0

    @property
    def prompt_cached(self) -> int | None:
        """Prompt tokens served from the KV cache (None when the evals were not observed)."""
        if self.prompt_evaluated is None:
            return None
        return max(0, self.prompt_tokens - self.prompt_evaluated)


@dataclass
class EngineStats:
    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    prompt_evaluated: int = 0
    completion_tokens: int = 0
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0
    total_seconds: float = 0.0

    def add(self, s: CallStats) -> None:
        self.calls += 1
        self.prompt_tokens += s.prompt_tokens
        self.prompt_evaluated += s.prompt_tokens if s.prompt_evaluated is None else s.prompt_evaluated
        self.completion_tokens += s.completion_tokens
        self.prompt_seconds += s.prompt_seconds
        self.generation_seconds += s.generation_seconds
        self.total_seconds += s.total_seconds


class LlamaCppEngine:
    """In-process llama.cpp engine for ``dspy.LM(..., engine=LlamaCppEngine(path))``."""

    supports_response_schema = True
    enforces_string_bounds = True  # a maxLength in the schema becomes part of the grammar (compact_adapter)
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset(
        {
            "temperature",
            "max_tokens",
            "response_format",
            "stop",
            "top_p",
            "top_k",
            "seed",
            "frequency_penalty",
            "presence_penalty",
            "logprobs",
            "top_logprobs",
        }
    )

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 4096,
        n_threads: int = 2,
        timeout: float = 120.0,
        max_tokens: int = 384,
        temperature: float = 0.0,
        seed: int = 0,
        ram_cache_mb: int = 0,
        llama_factory: Callable[[str, int, int, int], Any] | None = None,
    ):
        self.model_path = str(Path(model_path).expanduser())
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads)
        self.timeout = float(timeout)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.ram_cache_mb = int(ram_cache_mb)
        self._factory = llama_factory
        self.stats = EngineStats()
        self.last: CallStats | None = None
        self._sample_seeds = itertools.count(self.seed)  # one seed per sampled call (see ``complete``)

    def __repr__(self) -> str:
        return f"LlamaCppEngine({self.model_path!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    # The model is shared per process; loading happens on the first call (or explicitly here).
    def model(self) -> LoadedModel:
        return get_model(
            self.model_path,
            self.n_ctx,
            self.n_threads,
            seed=self.seed,
            ram_cache_mb=self.ram_cache_mb,
            factory=self._factory,
        )

    def complete(self, request: Request) -> Response:
        validate_request(request)
        messages = to_chat_messages(request)
        kwargs = completion_kwargs(
            request, default_max_tokens=self.max_tokens, default_temperature=self.temperature, seed=self.seed
        )
        if kwargs["temperature"] > 0 and request.config.seed is None:
            # llama.cpp reseeds its sampler on every call: with one seed, the same prompt sampled again
            # (dspy's ``rollout_id`` only bypasses the cache) would give the same "fresh" sample. Successive
            # sampled calls take successive seeds — different samples, the same sequence on every run.
            kwargs["seed"] = next(self._sample_seeds)
        top_logprobs = requested_logprobs(request)
        model = self.model()  # the first call loads it (not counted against the timeout)
        started = time.monotonic()
        deadline = started + self.timeout
        if not model.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            self.stats.failures += 1
            raise lm15.TimeoutError(
                f"timed out after {self.timeout:g}s waiting for the local model (busy with another call)",
                provider=PROVIDER,
            )
        try:
            wait = time.monotonic() - started
            model.deadline = deadline
            model.evals.clear()
            model.capture = None if top_logprobs is None else LogprobCapture(top_logprobs)
            try:
                out = model.llama.create_chat_completion(messages=messages, stream=False, **kwargs)
            except _Deadline:
                self.stats.failures += 1
                raise lm15.TimeoutError(
                    f"local generation exceeded lm.timeout={self.timeout:g}s", provider=PROVIDER
                ) from None
            except ValueError as exc:
                self.stats.failures += 1
                if "context window" in str(exc) or "exceed" in str(exc):
                    raise lm15.ContextLengthError(str(exc), provider=PROVIDER) from exc
                raise lm15.InvalidRequestError(str(exc), provider=PROVIDER) from exc
            except RuntimeError as exc:
                self.stats.failures += 1
                raise lm15.ServerError(f"llama.cpp failed: {exc}", provider=PROVIDER) from exc
            # Still under the lock: the per-call instrumentation and the engine's counters stay consistent.
            return self._response(request, out, model, wait, time.monotonic() - started)
        finally:
            model.deadline = None
            model.capture = None
            model.lock.release()

    def _response(
        self, request: Request, out: dict, model: LoadedModel, wait: float, total: float
    ) -> Response:
        evals = list(model.evals)
        choice = out["choices"][0]
        text = (choice.get("message") or {}).get("content") or ""
        usage = out.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        stats = CallStats(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            wait_seconds=wait,
            total_seconds=total,
        )
        if evals:
            stats.prompt_evaluated = evals[0][0]
            stats.prompt_seconds = evals[0][1]
            stats.generation_seconds = max(0.0, total - wait - stats.prompt_seconds)
        self.last = stats
        self.stats.add(stats)
        logprobs: tuple[TokenLogprob, ...] | None = None
        if model.capture is not None:
            logprobs = model.capture.token_logprobs(model.llama, text, completion_tokens) or None
        finish = _FINISH.get(choice.get("finish_reason") or "stop", "stop")
        return Response(
            id=out.get("id"),
            model=request.model,
            message=Message.assistant((TextPart(text),)),
            finish_reason=finish,
            usage=Usage(
                input_tokens=prompt_tokens,
                output_tokens=completion_tokens,
                cache_read_tokens=stats.prompt_cached,
            ),
            logprobs=logprobs,
        )

    def forget_prompts(self) -> None:
        """Make the next call evaluate its whole prompt (:meth:`LoadedModel.forget_prompts`); a model not
        loaded yet has nothing to forget."""
        model = loaded_model(self.model_path, self.n_ctx, self.n_threads)
        if model is not None:
            model.forget_prompts()

    def stream(self, request: Request) -> Iterator:
        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Engines are borrowed by DSPy; the shared model stays loaded (see :func:`unload_all`)."""

    # Saving an LM that holds this engine (a predictor-level LM) records its settings, not the model.
    def dump_state(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "timeout": self.timeout,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "ram_cache_mb": self.ram_cache_mb,
        }

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "LlamaCppEngine":
        state = dict(state)
        return cls(state.pop("model_path"), **state)


class AsyncLlamaCppEngine:
    """The async counterpart DSPy needs for ``acall``: runs the sync engine in a worker thread."""

    def __init__(self, sync: LlamaCppEngine):
        self.sync = sync

    async def complete(self, request: Request) -> Response:
        import asyncio

        return await asyncio.to_thread(self.sync.complete, request)

    async def stream(self, request: Request):
        for event in response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        """Nothing to release: the shared model outlives the engine."""

    def dump_state(self) -> dict[str, Any]:
        return self.sync.dump_state()

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "AsyncLlamaCppEngine":
        return cls(LlamaCppEngine.load_state(state))
