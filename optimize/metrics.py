"""Metrics for compiling and evaluating the program, all with DSPy's ``(example, pred, trace=None)``
signature.

Convention (as DSPy's optimizers expect): with ``trace is None`` (evaluation) a metric returns a float
in [0, 1]; with a trace (bootstrapping demos) it returns a bool, "good enough to keep as a demo".

Judgement metrics compare one output field with the label of the example built by
:mod:`optimize.records`:

- ``retrieve_accuracy``: ``pred.decision`` vs ``example.decision``
- ``relevance_accuracy``: ``pred.relevance`` vs ``example.relevance``
- ``support_accuracy``: ``pred.support`` vs ``example.support`` (exact label)
- ``answer_quality`` (the answer signature on a derived ``answer`` example): answerable example: token F1
  of ``pred.answer`` against the gold answers, 0 when ``pred.answerable`` is false; unanswerable: 1 when
  ``pred.answerable`` is false. With a trace: score >= ``E2E_TRACE_THRESHOLD``.
- ``usefulness_accuracy``: tolerant; correct when prediction and label are on the same side of 3
  (useful = 4 or 5, not useful = 1 or 2). A 3 (or an unparsable value) is never correct, since every
  label in the data is 1, 4 or 5.

End-to-end metrics read the program's prediction fields ``answer: str``, ``abstained: bool`` and
``cited_doc_ids: list[str]`` (a :class:`programs.types.RAGResult` with ``citations`` also works):

- ``exact_match`` / ``answer_f1``: SQuAD normalisation (lower case, drop punctuation and English
  articles, collapse whitespace) and bag-of-tokens F1 for English. If either side contains CJK
  characters, tokens are single CJK characters plus runs of Latin letters/digits (CMRC-style mixed
  segmentation), punctuation (ASCII and full width) and whitespace are dropped. The best score over
  ``example.answers`` (all gold answers) is taken.
- ``abstention_correct``: ``bool(pred.abstained) == (not example.answerable)``.
- ``citation_hit``: answerable example: 1 when a cited doc id is one of ``example.gold_doc_ids``
  (a chunk suffix ``#...`` on the cited id is ignored); None (not scored) without gold doc ids.
  Unanswerable example: 1 when nothing is cited.
- ``e2e_metric``: answerable: answer F1, 0 if the program abstained; unanswerable: 1 if it abstained
  else 0. With a trace: score >= ``E2E_TRACE_THRESHOLD``.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from typing import Any, Iterable

E2E_TRACE_THRESHOLD = 0.5

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK_RE = re.compile(rf"[{_CJK}]")
_MIXED_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+", re.UNICODE)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


# ---------------------------------------------------------------- text normalisation and scores


def has_cjk(text: str) -> bool:
    return bool(_CJK_RE.search(text or ""))


def _is_punct(ch: str) -> bool:
    return ch in _PUNCT or unicodedata.category(ch)[0] in "PS"


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, remove punctuation, articles and extra whitespace."""
    text = (text or "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def normalize_cjk(text: str) -> str:
    """CJK normalisation: NFKC (full width to half width), lower case, drop punctuation and spaces."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    return "".join(ch for ch in text if not ch.isspace() and not _is_punct(ch))


def tokens(text: str, cjk: bool | None = None) -> list[str]:
    """Tokens used by F1. ``cjk=None`` decides from the text itself."""
    if cjk is None:
        cjk = has_cjk(text)
    text = unicodedata.normalize("NFKC", text or "")  # full-width letters and digits are the same tokens
    if cjk:  # each CJK character a token; a Latin word or a number one token (spaces still separate them)
        return _MIXED_TOKEN_RE.findall("".join(" " if _is_punct(ch) else ch for ch in text.lower()))
    return normalize_answer(text).split()


def token_f1(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 (SQuAD); character level when either string contains CJK."""
    cjk = has_cjk(prediction) or has_cjk(gold)
    p, g = tokens(prediction, cjk), tokens(gold, cjk)
    if not p or not g:
        return float(p == g)
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def token_precision(prediction: str, gold: str) -> float:
    """Share of the prediction's tokens found in the gold answer (bag of tokens; characters for CJK):
    how much of what an answer says a long-form gold answer backs, whatever the answer's length."""
    cjk = has_cjk(prediction) or has_cjk(gold)
    p, g = tokens(prediction, cjk), tokens(gold, cjk)
    if not p or not g:
        return float(p == g)
    return sum((Counter(p) & Counter(g)).values()) / len(p)


def exact(prediction: str, gold: str) -> float:
    if has_cjk(prediction) or has_cjk(gold):
        return float(normalize_cjk(prediction) == normalize_cjk(gold))
    return float(normalize_answer(prediction) == normalize_answer(gold))


# ---------------------------------------------------------------- reading examples and predictions


def field_value(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` of a dict, else ``obj.name`` (an Example, a Prediction); ``default`` when missing or None."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    try:
        value = getattr(obj, name)
    except (AttributeError, KeyError):
        return default
    return default if value is None else value


def gold_answers(example: Any) -> list[str]:
    """The non-empty gold answers: ``example.answers``, else ``[example.answer]``, else ``[]``."""
    answers = field_value(example, "answers") or []
    if isinstance(answers, str):
        answers = [answers]
    answers = [a for a in answers if isinstance(a, str) and a.strip()]
    if not answers:
        single = field_value(example, "answer", "")
        answers = [single] if single else []
    return answers


def answer_text(pred: Any) -> str:
    """``pred.answer`` as a string (``""`` when missing)."""
    value = field_value(pred, "answer", "")
    return value if isinstance(value, str) else str(value)


def cited_ids(pred: Any) -> list[str]:
    """``pred.cited_doc_ids``, or the ids of ``pred.citations`` objects (RAGResult)."""
    ids = field_value(pred, "cited_doc_ids")
    if ids is None:
        ids = [field_value(c, "id") for c in (field_value(pred, "citations") or []) if not isinstance(c, int)]
    if isinstance(ids, str):
        ids = [ids]
    return [str(i) for i in ids if i is not None and str(i)]


def document_id(cited: str) -> str:
    """A knowledge-base chunk id ``<doc_id>#<n>`` cites the document ``<doc_id>``."""
    return cited.split("#", 1)[0]


def _label(value: Any) -> str:
    if value is None:
        return ""
    return str(getattr(value, "value", value)).strip().strip("\"'").lower()


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    match = re.search(r"[1-5]", str(value or ""))
    return int(match.group()) if match else None


def _result(score: float, trace: Any, threshold: float = 1.0) -> float | bool:
    return score >= threshold if trace is not None else float(score)


# ---------------------------------------------------------------- judgement metrics


def _label_match(field: str):
    def metric(example: Any, pred: Any, trace: Any = None) -> float | bool:
        gold, got = _label(field_value(example, field)), _label(field_value(pred, field))
        return _result(float(bool(gold) and gold == got), trace)

    metric.__name__ = f"{field}_accuracy"
    metric.__doc__ = f"1 when ``pred.{field}`` equals ``example.{field}`` (case-insensitive)."
    return metric


def retrieve_accuracy(example: Any, pred: Any, trace: Any = None) -> float | bool:
    """1 when ``pred.decision`` equals ``example.decision`` (case-insensitive), where "continue" on a
    question with no answer so far means "yes" — the program reads it so (P(retrieve) = P(yes) +
    P(continue)), and the local model says "continue" for most first decisions."""
    gold, got = _label(field_value(example, "decision")), _label(field_value(pred, "decision"))
    if got == "continue" and gold != "continue" and not str(field_value(example, "answer_so_far") or "").strip():
        got = "yes"
    return _result(float(bool(gold) and gold == got), trace)


relevance_accuracy = _label_match("relevance")
support_accuracy = _label_match("support")


def usefulness_side(value: Any) -> str | None:
    """'useful' for 4-5, 'not_useful' for 1-2, None for 3 or unparsable."""
    n = _as_int(value)
    if n is None or n == 3 or not 1 <= n <= 5:
        return None
    return "useful" if n >= 4 else "not_useful"


def usefulness_accuracy(example: Any, pred: Any, trace: Any = None) -> float | bool:
    """Tolerant: correct when label and prediction are on the same side of 3 (>=4 vs <=2)."""
    gold, got = usefulness_side(field_value(example, "usefulness")), usefulness_side(field_value(pred, "usefulness"))
    return _result(float(gold is not None and gold == got), trace)



def answer_quality(example: Any, pred: Any, trace: Any = None) -> float | bool:
    """The answer signature: F1 when it should answer (0 if it says unanswerable), abstention when not."""
    said = field_value(pred, "answerable", True)
    said = said if isinstance(said, bool) else str(said).strip().lower() not in ("false", "no", "0")
    if not bool(field_value(example, "answerable", True)):
        return _result(float(not said), trace)
    score = max((token_f1(answer_text(pred), g) for g in gold_answers(example)), default=0.0) if said else 0.0
    return _result(score, trace, E2E_TRACE_THRESHOLD)


# ---------------------------------------------------------------- end-to-end metrics


def exact_match(example: Any, pred: Any, trace: Any = None) -> float | bool:
    """Best normalised exact match over the gold answers (0 for an example without gold answer)."""
    golds, answer = gold_answers(example), answer_text(pred)
    score = max((exact(answer, g) for g in golds), default=0.0)
    return _result(score, trace)


def answer_f1(example: Any, pred: Any, trace: Any = None) -> float | bool:
    """Best token F1 over the gold answers (character level for CJK)."""
    golds, answer = gold_answers(example), answer_text(pred)
    score = max((token_f1(answer, g) for g in golds), default=0.0)
    return _result(score, trace, E2E_TRACE_THRESHOLD)


RIGHT_PRECISION = 0.5


def answer_precision(example: Any, pred: Any, trace: Any = None) -> float | bool:
    """Best token precision over the gold answers: the share of the answer's tokens a gold answer has."""
    golds, answer = gold_answers(example), answer_text(pred)
    score = max((token_precision(answer, g) for g in golds), default=0.0)
    return _result(score, trace, RIGHT_PRECISION)


def is_right_answer(answer: str, golds: list[str], answerable: bool = True) -> bool:
    """Whether an answer should have been given: the question is answerable and at least half of the
    answer's tokens are in a gold answer (long-form gold answers make token F1 a poor yes/no criterion:
    a right short answer to a ClapNQ question has F1 ~0.2 and precision ~1). The one definition used by
    the answer-threshold calibration and the eval's coverage–accuracy curve."""
    return answerable and bool(answer.strip()) and \
        max((token_precision(answer, g) for g in golds), default=0.0) >= RIGHT_PRECISION


def abstention_correct(example: Any, pred: Any, trace: Any = None) -> float | bool:
    """1 when the program abstained exactly on the unanswerable questions."""
    answerable = bool(field_value(example, "answerable", True))
    return _result(float(bool(field_value(pred, "abstained", False)) == (not answerable)), trace)


def citation_hit(example: Any, pred: Any, trace: Any = None) -> float | bool | None:
    """Answerable: a cited doc id is a gold doc id; None without gold doc ids (nothing to hit: an
    abstention, citing nothing, must not score 1 there). Unanswerable: nothing is cited."""
    gold = set(field_value(example, "gold_doc_ids") or [])
    cited = {document_id(c) for c in cited_ids(pred)}
    if not bool(field_value(example, "answerable", True)):
        return _result(float(not cited), trace)
    if not gold:
        return None
    return _result(float(bool(cited & gold)), trace)


def e2e_score(example: Any, pred: Any) -> float:
    abstained = bool(field_value(pred, "abstained", False))
    if not bool(field_value(example, "answerable", True)):
        return 1.0 if abstained else 0.0
    if abstained:
        return 0.0
    return float(answer_f1(example, pred))


def e2e_metric(example: Any, pred: Any, trace: Any = None) -> float | bool:
    """Optimizer metric: F1 gated by not abstaining (answerable), abstention (unanswerable)."""
    return _result(e2e_score(example, pred), trace, E2E_TRACE_THRESHOLD)



def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0

