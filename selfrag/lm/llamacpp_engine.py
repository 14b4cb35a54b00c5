"""A DSPy 3.4 custom engine that runs a GGUF model in process with llama-cpp-python.

Use it as ``dspy.LM("llamacpp/<name>", engine=LlamaCppEngine(path), num_retries=0)``.

- The engine implements DSPy's canonical contract (``complete(Request) -> Response``, ``stream``,
  ``close``; see ``dspy/clients/engines/base.py``) and declares ``supports_response_schema`` so
  ``dspy.JSONAdapter`` sends the signature's output schema. A ``json_schema`` response format is
  translated to llama.cpp's ``{"type": "json_object", "schema": ...}``: decoding is constrained by a
  grammar built from the schema (Literal outputs become enums the model cannot leave).
- The model is loaded lazily, once per process per (path, n_ctx, threads), and shared by every engine
  with the same key; a lock serialises calls so concurrent threads never touch one ``Llama`` at once.
- Keeping one ``Llama`` per process keeps llama.cpp's KV cache: a call whose prompt shares a prefix
  with the previous call (the system prompt of a signature) only evaluates the new suffix. With
  ``ram_cache_mb`` the states of earlier prompts are kept too, so alternating signatures reuse theirs.
  The engine measures evaluated vs total prompt tokens and reports the reused ones as ``cache_read_tokens``.
- Failures are raised as ``dspy.lm15`` errors (timeout, context length, unsupported feature,
  configuration, server) so DSPy records them; the LM should be built with ``num_retries=0``
  because a local failure is not a transient network error.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dspy import lm15
from dspy.clients.engines.base import validate_request
from dspy.lm15 import Message, Request, Response, TextPart, Usage, response_to_events

logger = logging.getLogger(__name__)

PROVIDER = "llama.cpp"
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_call", "function_call": "tool_call"}


# ─── The shared, lazily loaded model ────────────────────────────────────────


class _Deadline(Exception):
    """Raised inside llama.cpp's generation loop when a call runs out of time."""


@dataclass
class LoadedModel:
    """One ``Llama`` and the lock and per-call instrumentation that go with it."""

    llama: Any
    path: str
    load_seconds: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Written by the eval hook; read/reset only while holding ``lock``.
    deadline: float | None = None
    evals: list[tuple[int, float]] = field(default_factory=list)

    def instrument(self) -> None:
        """Wrap ``llama.eval`` to time the prompt/generation evals and enforce the call deadline.

        ``Llama.generate`` calls ``eval`` once with the prompt suffix not already in the KV cache,
        then once per generated token, so the first eval of a call is the prompt.
        """
        original = getattr(self.llama, "eval", None)
        if original is None or getattr(original, "_selfrag_hook", False):
            return

        step = max(1, int(getattr(self.llama, "n_batch", 512) or 512))

        def eval_hook(tokens):
            # A long prompt is fed one batch at a time so the deadline is checked between batches
            # (Llama.eval batches the same way; each call continues from ``n_tokens``).
            started = time.perf_counter()
            for i in range(0, max(1, len(tokens)), step):
                if self.deadline is not None and time.monotonic() > self.deadline:
                    raise _Deadline()
                original(tokens[i : i + step])
            self.evals.append((len(tokens), time.perf_counter() - started))

        eval_hook._selfrag_hook = True  # type: ignore[attr-defined]
        self.llama.eval = eval_hook


_MODELS: dict[tuple[str, int, int], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def _default_llama_factory(path: str, n_ctx: int, n_threads: int, seed: int) -> Any:
    try:
        from llama_cpp import Llama
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise lm15.ConfigurationError(
            "llama-cpp-python is not installed; install the 'local' extra: pip install 'selfrag[local]' "
            "(or pip install llama-cpp-python==0.3.36)",
            provider=PROVIDER,
        ) from exc
    return Llama(
        model_path=path,
        n_ctx=n_ctx,
        n_threads=n_threads,
        n_threads_batch=n_threads,
        n_batch=512,
        seed=seed,
        use_mmap=True,
        verbose=False,  # chat_format=None: the chat template comes from the GGUF metadata
    )


def _attach_ram_cache(llama: Any, ram_cache_mb: int) -> None:
    """Attach a ``LlamaRAMCache`` whose entries hold the KV state only.

    Stock ``Llama.save_state`` also copies the logits buffer (``n_batch x n_vocab`` floats: ~300 MB for
    Qwen's 152k vocabulary) that ``LlamaRAMCache`` does not count against its capacity, which makes
    each save/load take ~1 s and the cache grow far past its limit. Without ``logits_all`` those saved
    logits are never read (a restored state is re-evaluated from its last token before sampling), so
    save and load see a one-row view instead: entries shrink to the KV cells actually used
    (~7 MB for a 250-token prompt on Qwen) and capacity accounting becomes truthful.
    """
    from llama_cpp import LlamaRAMCache

    llama.set_cache(LlamaRAMCache(capacity_bytes=int(ram_cache_mb) << 20))
    if getattr(llama, "_logits_all", True) or not hasattr(llama, "scores"):
        return
    save, load = llama.save_state, llama.load_state

    def with_one_row_scores(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            full = llama.scores
            llama.scores = full[:1]
            try:
                return fn(*args, **kwargs)
            finally:
                llama.scores = full

        return wrapper

    llama.save_state = with_one_row_scores(save)
    llama.load_state = with_one_row_scores(load)


def get_model(
    path: str | Path,
    n_ctx: int,
    n_threads: int,
    *,
    seed: int = 0,
    ram_cache_mb: int = 0,
    factory: Callable[[str, int, int, int], Any] | None = None,
) -> LoadedModel:
    """The process-wide model for (path, n_ctx, n_threads), loaded on first use.

    ``ram_cache_mb`` > 0 attaches llama.cpp's ``LlamaRAMCache``: the KV state after each call is kept
    (LRU, up to that many MiB) and a later prompt restores the state with the longest common prefix,
    so calls that alternate between signatures still reuse each signature's system prompt. The first
    engine to load a model decides its cache size.
    """
    key = (str(Path(path).expanduser()), int(n_ctx), int(n_threads))
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is not None:
            return model
        if factory is None and not Path(key[0]).is_file():
            raise lm15.ConfigurationError(f"GGUF model file not found: {key[0]}", provider=PROVIDER)
        started = time.perf_counter()
        try:
            llama = (factory or _default_llama_factory)(key[0], key[1], key[2], seed)
        except lm15.LM15Error:
            raise
        except Exception as exc:
            raise lm15.ConfigurationError(
                f"could not load GGUF model {key[0]}: {exc}", provider=PROVIDER
            ) from exc
        if ram_cache_mb > 0 and hasattr(llama, "set_cache"):
            _attach_ram_cache(llama, ram_cache_mb)
        model = LoadedModel(llama=llama, path=key[0], load_seconds=time.perf_counter() - started)
        model.instrument()
        _MODELS[key] = model
        logger.info("loaded %s (n_ctx=%d, threads=%d) in %.2fs", key[0], key[1], key[2], model.load_seconds)
        return model


def unload_all() -> None:
    """Drop every loaded model (frees memory once no engine call is running)."""
    with _MODELS_LOCK:
        models = list(_MODELS.values())
        _MODELS.clear()
    for model in models:
        with model.lock:
            close = getattr(model.llama, "close", None)
            if callable(close):
                close()


# ─── Request translation ────────────────────────────────────────────────────


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


@functools.lru_cache(maxsize=64)
def _schema_compiles(schema_json: str) -> bool:
    """Whether llama.cpp turns the schema into a grammar (it silently falls back to any-JSON otherwise)."""
    try:
        from llama_cpp.llama_grammar import LlamaGrammar

        LlamaGrammar.from_json_schema(schema_json, verbose=False)
        return True
    except ImportError:
        return True  # a fake Llama in tests; nothing to check against
    except Exception as exc:  # noqa: BLE001 - any converter failure means "no schema grammar"
        logger.warning(
            "llama.cpp cannot compile this JSON schema to a grammar (%s); decoding any JSON instead", exc
        )
        return False


def to_llama_response_format(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """lm15's ``response_format`` as llama-cpp-python's: ``json_schema`` -> ``json_object`` + ``schema``."""
    if response_format is None:
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = response_format["schema"]
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
    if config.logprobs is not None or config.probabilities is not None:
        raise lm15.UnsupportedFeatureError(
            "the llama.cpp engine does not return logprobs", feature="logprobs", provider=PROVIDER
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


# ─── The engine ─────────────────────────────────────────────────────────────


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
            return self._response(request, out, list(model.evals), wait, time.monotonic() - started)
        finally:
            model.deadline = None
            model.lock.release()

    def _response(
        self, request: Request, out: dict, evals: list[tuple[int, float]], wait: float, total: float
    ) -> Response:
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
        cached = None
        if stats.prompt_evaluated is not None:
            cached = max(0, prompt_tokens - stats.prompt_evaluated)
        finish = _FINISH.get(choice.get("finish_reason") or "stop", "stop")
        return Response(
            id=out.get("id"),
            model=request.model,
            message=Message.assistant((TextPart(text),)),
            finish_reason=finish,
            usage=Usage(
                input_tokens=prompt_tokens, output_tokens=completion_tokens, cache_read_tokens=cached
            ),
        )

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
