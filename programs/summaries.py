"""The index builders' LM steps as plain callables: ``LMSummariser(texts) -> str`` and
``LMQuestionWriter(text) -> list[str]`` (``selfrag.kb.indexes.build_index`` takes them).

Each call is one typed prediction (``SummarizeTexts``, ``HypotheticalQuestions``) in the given LM's
scope; texts are quoted like passages. A failed call raises: the builders record it and go on.
"""

from __future__ import annotations

import threading

import dspy

from programs.base import lm_scope
from programs.passages import format_passages
from programs.types import Passage
from signatures import HypotheticalQuestions, SummarizeTexts

TEXT_CHARS = 1500


class _LMStep:
    def __init__(self, signature: type[dspy.Signature], lm: dspy.BaseLM | None = None,
                 adapter: dspy.Adapter | None = None, max_chars: int = TEXT_CHARS):
        self.predict = dspy.Predict(signature)
        self.lm, self.adapter, self.max_chars = lm, adapter, max_chars
        self.calls = 0
        self._lock = threading.Lock()

    def _run(self, **inputs) -> dspy.Prediction:
        with self._lock:
            self.calls += 1
        with lm_scope(self.lm, self.adapter):
            return self.predict(**inputs)


class LMSummariser(_LMStep):
    """``summarise(texts)``: one paragraph summarising the texts (a RAPTOR cluster, or one chunk)."""

    def __init__(self, lm: dspy.BaseLM | None = None, adapter: dspy.Adapter | None = None, max_chars: int = 600):
        super().__init__(SummarizeTexts, lm, adapter, max_chars)

    def __call__(self, texts: list[str]) -> str:
        quoted = format_passages([Passage(id=str(i), text=t) for i, t in enumerate(texts)], self.max_chars)
        return str(self._run(texts=quoted).summary or "").strip()


class LMQuestionWriter(_LMStep):
    """``questions(text)``: up to ``n`` questions the text answers."""

    def __init__(self, lm: dspy.BaseLM | None = None, adapter: dspy.Adapter | None = None, n: int = 3,
                 max_chars: int = TEXT_CHARS):
        super().__init__(HypotheticalQuestions.with_updated_fields("questions", max_length=n), lm, adapter, max_chars)
        self.n = n

    def __call__(self, text: str) -> list[str]:
        quoted = format_passages([Passage(id="0", text=text)], self.max_chars)
        return [str(q).strip() for q in (self._run(passage=quoted, n=self.n).questions or []) if str(q).strip()][: self.n]
