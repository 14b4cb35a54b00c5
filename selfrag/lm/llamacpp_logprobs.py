"""Token log-probabilities from an in-process llama.cpp model, without ``logits_all``.

llama-cpp-python 0.3.x computes ``logprobs`` only for models created with ``logits_all=True``
(``create_completion`` raises ``ValueError`` otherwise). That mode keeps the logits of *every* prompt
and generated position (``n_ctx x n_vocab`` float32: 2.5 GB for Qwen's 152k vocabulary at 4k context),
makes llama.cpp output logits for every prompt token, sorts the whole vocabulary in Python per
token, and defeats the one-row RAM-cache trick. So the engine captures them itself:
:func:`install_sample_hook` wraps ``Llama.sample`` (called once per generated token by
``Llama.generate``) and, while a :class:`LogprobCapture` is attached, reads the logits row the
sampler is about to use (``llama_get_logits_ith``), keeps its log-softmax top-k and the log-probability
of the token the sampler returns.

**Raw, pre-grammar.** These logits are the model's raw next-token scores: the sampler chain
(penalties, then the JSON-schema grammar, then greedy/temperature) works on a copy, so the reported
distribution is *before* the grammar, at temperature 1 — the same thing llama-cpp-python's own
``logprobs`` reports (it reads ``Llama.scores``, filled by ``eval`` before sampling). Alternatives the
grammar forbids therefore appear among the top-k, and a token the grammar forced can have a low
log-probability. :mod:`programs.soft_labels` turns this into label probabilities by keeping only
the alternatives consistent with a label and renormalising over them (so a forced label, with no
other label among the alternatives, comes out with probability 1).
"""

from __future__ import annotations

import codecs
import ctypes
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from dspy.lm15 import TokenLogprob, TopLogprob

logger = logging.getLogger(__name__)


@dataclass
class _Step:
    token: int
    logprob: float
    top: list[tuple[int, float]]


@dataclass
class LogprobCapture:
    """What one call sampled: per generated token its id, log-probability and the raw top-``top_k``."""

    top_k: int
    steps: list[_Step] = field(default_factory=list)
    # Set when reading the logits failed: the call goes on without logprobs.
    failed: str | None = None

    def observe(self, logits: np.ndarray, token: int) -> None:
        """Record one sampling step from the logits row the sampler used and the token it chose."""
        row = np.asarray(logits, dtype=np.float32)
        peak = float(row.max())
        lse = peak + float(np.log(np.exp(row - peak, dtype=np.float64).sum()))
        top: list[tuple[int, float]] = []
        k = min(self.top_k, row.shape[0])
        if k > 0:
            ids = np.argpartition(row, -k)[-k:]
            ids = ids[np.argsort(-row[ids], kind="stable")]
            top = [(int(i), float(row[i]) - lse) for i in ids]
        self.steps.append(_Step(int(token), float(row[int(token)]) - lse, top))

    def token_logprobs(self, llama: Any, text: str, completion_tokens: int) -> tuple[TokenLogprob, ...]:
        """The steps as lm15 ``TokenLogprob``s whose token strings concatenate to ``text``.

        Only the first ``completion_tokens`` steps are text (a last step that chose end-of-generation
        is dropped). When a stop sequence cut the text short, tokens past its end are dropped and the
        token it cut through is trimmed to the retained characters.
        """
        if self.failed:
            return ()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        out: list[TokenLogprob] = []
        length = 0
        for step in self.steps[: max(0, completion_tokens)]:
            piece = _piece(llama, step.token, special=False)
            token = decoder.decode(piece)
            if length + len(token) > len(text):
                token = token[: len(text) - length]
            if not token and length >= len(text):
                break
            length += len(token)
            top = tuple(_alternative(llama, i, lp) for i, lp in step.top)
            chosen = TokenLogprob(token=token, logprob=step.logprob, bytes=tuple(piece), token_id=step.token, top=top)
            out.append(chosen)
        return tuple(out)


def _alternative(llama: Any, token: int, logprob: float) -> TopLogprob:
    piece = _piece(llama, token, special=True)  # special: an end-of-turn token shows as such, never as ""
    return TopLogprob(token=piece.decode("utf-8", errors="replace"), logprob=logprob, bytes=tuple(piece), token_id=token)


def _piece(llama: Any, token: int, *, special: bool) -> bytes:
    return bytes(llama.detokenize([token], special=special))


def read_logits(llama: Any, idx: int) -> np.ndarray:
    """The logits row ``idx`` of the last decoded batch (-1: the last token), as llama.cpp holds it."""
    pointer = llama._ctx.get_logits_ith(idx)
    if not pointer:
        raise RuntimeError(f"llama.cpp has no logits for batch position {idx}")
    floats = ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float))
    return np.ctypeslib.as_array(floats, shape=(llama.n_vocab(),))


def install_sample_hook(llama: Any, capture_of) -> None:
    """Wrap ``llama.sample`` so each sampled token is recorded in ``capture_of()`` when that is set.

    ``Llama.generate`` calls ``self.sample(..., idx=sample_idx)``; the sampler reads logits row
    ``idx - n_tokens`` of the last batch, so the hook reads the same row before sampling.
    """
    original = getattr(llama, "sample", None)
    if original is None or getattr(original, "_selfrag_hook", False):
        return

    def sample_hook(*args, **kwargs):
        capture = capture_of()
        if capture is None or capture.failed:
            return original(*args, **kwargs)
        idx = kwargs.get("idx")
        try:
            row = read_logits(llama, -1 if idx is None else idx - llama.n_tokens)
        except Exception as exc:  # noqa: BLE001 - logprobs are telemetry: the call goes on without them
            capture.failed = f"cannot read llama.cpp logits: {exc}"
            logger.warning("%s; this call returns no logprobs", capture.failed)
            return original(*args, **kwargs)
        token = original(*args, **kwargs)
        capture.observe(row, token)
        return token

    sample_hook._selfrag_hook = True  # type: ignore[attr-defined]
    llama.sample = sample_hook
