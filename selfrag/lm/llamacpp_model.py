"""The process-wide llama.cpp model behind :class:`selfrag.lm.llamacpp_engine.LlamaCppEngine`.

- A model is loaded lazily, once per process per (path, n_ctx, threads), and shared by every engine
  with the same key; its lock serialises calls so concurrent threads never touch one ``Llama`` at once.
- Keeping one ``Llama`` per process keeps llama.cpp's KV cache: a call whose prompt shares a prefix
  with the previous call (the system prompt of a signature) only evaluates the new suffix. With
  ``ram_cache_mb`` the states of earlier prompts are kept too, so alternating signatures reuse theirs.
  :meth:`LoadedModel.forget_prompts` drops both: the next call evaluates its whole prompt and takes the
  time it takes in a fresh process (its output is the same either way, see below).
- :meth:`LoadedModel.instrument` hooks ``eval`` (prompt/generation timing, the call deadline, how many
  prompt tokens were really evaluated, chunk-aligned prefix reuse) and ``sample`` (token
  log-probabilities, see :mod:`selfrag.lm.llamacpp_logprobs`).
- **A call's output depends on its prompt only.** llama.cpp's logits for a token depend on how the prompt
  was cut into batches (where a batch starts and how long it is pick the matrix kernels' paths), so a
  prompt evaluated after a cached prefix gives other logits than one evaluated whole (measured on the local
  model: a 1–32-token suffix after a cached prefix moves the last token's logits by up to 0.49), and greedy
  decoding tips on a near tie. The eval hook therefore reuses a cached prefix only up to a multiple of
  ``n_batch`` within the earlier prompt and evaluates the rest in batches starting at those multiples:
  every batch is then the batch a cold evaluation runs, and the logits are the same to the bit.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dspy import lm15

from selfrag.lm.llamacpp_logprobs import LogprobCapture, install_sample_hook

logger = logging.getLogger(__name__)

PROVIDER = "llama.cpp"


# Prompt batch size. Reuse of a cached prefix is cut to a multiple of it (see the module doc), so a small
# batch keeps more of the reuse. Measured on 2 cores with the local model (1,200-token prompt, three runs
# each): 64 → ~84 tokens/s, 128 → ~91, 256 → ~88, 512 → ~92; 128 keeps the speed and loses ~64 tokens
# of a shared prefix on average.
N_BATCH = 128


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
    # Set for a call that asked for logprobs; the sample hook records into it.
    capture: LogprobCapture | None = None
    # Where the prompt of the KV cache's last call ended (the KV cells after it hold generated tokens).
    prompt_end: int = 0

    def instrument(self) -> None:
        """Wrap ``llama.eval`` to time the prompt/generation evals and enforce the call deadline,
        and ``llama.sample`` to record token log-probabilities while :attr:`capture` is set.

        ``Llama.generate`` calls ``eval`` once with the prompt suffix not already in the KV cache,
        then once per generated token, so the first eval of a call is the prompt.
        """
        install_sample_hook(self.llama, lambda: self.capture)
        original = getattr(self.llama, "eval", None)
        if original is None or getattr(original, "_selfrag_hook", False):
            return

        llama = self.llama
        step = max(1, int(getattr(llama, "n_batch", 512) or 512))

        def eval_hook(tokens):
            # A long prompt is fed one batch at a time so the deadline is checked between batches
            # (Llama.eval batches the same way; each call continues from ``n_tokens``).
            started = time.perf_counter()
            prompt = not self.evals and bool(getattr(llama, "_requires_eval", True))
            if prompt and hasattr(llama, "n_tokens") and hasattr(llama, "input_ids"):
                cached = int(llama.n_tokens)
                start = aligned_prefix(cached, self.prompt_end, step)
                if start < cached:  # re-evaluate the cached tail of an unfinished batch
                    tokens = [int(t) for t in llama.input_ids[start:cached]] + list(tokens)
                    llama.n_tokens = start
            for i in range(0, max(1, len(tokens)), step):
                if self.deadline is not None and time.monotonic() > self.deadline:
                    raise _Deadline()
                original(tokens[i : i + step])
            if prompt:
                self.prompt_end = int(getattr(llama, "n_tokens", 0))
            self.evals.append((len(tokens), time.perf_counter() - started))

        eval_hook._selfrag_hook = True  # type: ignore[attr-defined]
        llama.eval = eval_hook
        self._carry_prompt_end()

    def _carry_prompt_end(self) -> None:
        """A state saved to the RAM cache keeps where its prompt ended; loading it restores that."""
        save, load = getattr(self.llama, "save_state", None), getattr(self.llama, "load_state", None)
        if save is None or load is None:
            return

        @functools.wraps(save)
        def save_state(*args, **kwargs):
            state = save(*args, **kwargs)
            try:
                state.selfrag_prompt_end = self.prompt_end
            except AttributeError:  # a state that takes no attribute: loading it reuses no prefix
                pass
            return state

        @functools.wraps(load)
        def load_state(state, *args, **kwargs):
            load(state, *args, **kwargs)
            self.prompt_end = int(getattr(state, "selfrag_prompt_end", 0))

        self.llama.save_state, self.llama.load_state = save_state, load_state

    def forget_prompts(self) -> None:
        """Forget every prompt evaluated so far: the KV cache's prefix and the RAM cache's saved states.

        The output of a call does not depend on the cache (prefixes are reused in whole batches, see the
        module doc); its time does. An eval that times each question as a fresh ``selfrag ask`` process
        calls this before each (program, question)."""
        with self.lock:
            self.llama.reset()
            self.prompt_end = 0
            cache = getattr(self.llama, "cache", None)
            if cache is not None:
                self.llama.set_cache(type(cache)(capacity_bytes=cache.capacity_bytes))


def aligned_prefix(cached: int, prompt_end: int, step: int) -> int:
    """How many cached tokens a prompt may reuse: the longest cached prefix (``cached``), cut to the
    earlier prompt (KV cells past ``prompt_end`` were computed one generated token at a time) and down to
    a multiple of ``step`` (``n_batch``), so every batch evaluated next starts where a cold evaluation's
    batch starts and holds the same tokens."""
    return (max(0, min(cached, prompt_end)) // step) * step


_MODELS: dict[tuple[str, int, int], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def _model_key(path: str | Path, n_ctx: int, n_threads: int) -> tuple[str, int, int]:
    return str(Path(path).expanduser()), int(n_ctx), int(n_threads)


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
        n_batch=N_BATCH,
        seed=seed,
        use_mmap=True,
        verbose=False,  # chat_format=None: the chat template comes from the GGUF metadata
    )


def _attach_ram_cache(llama: Any, ram_cache_mb: int) -> None:
    """Attach a ``LlamaRAMCache`` whose entries hold the KV state only.

    Stock ``Llama.save_state`` also copies the logits buffer (``n_batch x n_vocab`` floats: ~78 MB at
    n_batch 128 for Qwen's 152k vocabulary) that ``LlamaRAMCache`` does not count against its capacity, which makes
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
    key = _model_key(path, n_ctx, n_threads)
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


def loaded_model(path: str | Path, n_ctx: int, n_threads: int) -> LoadedModel | None:
    """The process-wide model for (path, n_ctx, n_threads) if it is loaded (never loads it)."""
    with _MODELS_LOCK:
        return _MODELS.get(_model_key(path, n_ctx, n_threads))


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
