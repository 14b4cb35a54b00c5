"""How long a written answer may be: what fits in the generator's ``max_tokens``, in the language of the
question or of the passages it reads.

A small model asked for a short answer sometimes copies a whole passage instead; the reply then runs into
``max_tokens`` before the JSON closes and does not parse — a draft lost (and, under greedy decoding, lost again
on the retry), so the question is abstained on as ``lm_error``. Bounding the answer string in the output
schema (``maxLength``; :mod:`selfrag.lm.compact_adapter` keeps it, constrained decoding enforces it) makes the
reply close in time: a run-on answer is cut, the citations and the ``answerable`` flag still follow.

The bound is the tokens left after the JSON around the answer, times the characters a token holds in the
language of the question or of a passage the answer reads, whichever holds fewer (a run-on answer copies a
passage), taken below what the local model's tokenizer gives on average (Qwen2.5 on the labelled answers:
1.37 characters a token for Chinese, 4.5 for English): a typical bounded answer fits; one dense with digits,
each its own token, may still not. An LM without ``max_tokens`` gets no bound.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import dspy

CHARS_PER_TOKEN = {"zh": 1.2, "en": 3.5}
JSON_OVERHEAD_TOKENS = 48  # {"answer": "…", "citations": [1, 2, 3], "answerable": true} and some slack
MIN_ANSWER_CHARS = 32


def answer_max_chars(max_tokens: int | None, language: str) -> int | None:
    """The longest answer, in characters, that leaves room for the rest of the reply in ``max_tokens``
    (None: no bound)."""
    if not max_tokens:
        return None
    ratio = CHARS_PER_TOKEN.get(language, min(CHARS_PER_TOKEN.values()))
    return max(MIN_ANSWER_CHARS, int((max_tokens - JSON_OVERHEAD_TOKENS) * ratio))


def min_answer_chars(max_tokens: int | None, languages: Iterable[str]) -> int | None:
    """The tightest of :func:`answer_max_chars` over ``languages`` (the question's and its passages')."""
    bounds = [answer_max_chars(max_tokens, language) for language in languages]
    return min((b for b in bounds if b is not None), default=None)


def lm_max_tokens(lm: Any) -> int | None:
    """``max_tokens`` of ``lm`` (a ``dspy.LM``'s kwargs), else of the configured LM; None when unset."""
    lm = lm if lm is not None else dspy.settings.lm
    value = (getattr(lm, "kwargs", None) or {}).get("max_tokens")
    return value if isinstance(value, int) and value > 0 else None


def bounded_answer(predictor: dspy.Predict, field: str, max_chars: int | None) -> Callable[..., Any]:
    """``predictor`` called with its signature's ``field`` bounded to ``max_chars`` (the predictor itself when
    None). The signature is passed per call, so the compiled predictor — its demos, instructions and its place
    in an optimizer's trace — is the one that runs."""
    if max_chars is None:
        return predictor
    signature = predictor.signature.with_updated_fields(field, max_length=max_chars)
    return functools.partial(predictor, signature=signature)
