"""The program's decision thresholds on soft judgement scores, the routing functions that read them,
and the expected (soft) candidate score of Self-RAG.

Every judgement yields a probability per label (read from the label tokens' log-probabilities, or 1
for the decoded label when a backend has none). Three thresholds turn probabilities into routes:

* ``retrieve`` (Self-RAG's δ): retrieve when P(retrieve) ≥ δ;
* ``relevance``: keep a passage when P(relevant) ≥ the threshold;
* ``answer``: answer with the final candidate when its confidence ≥ the threshold, else abstain;
* ``stated``: before drafting, the answer check's P(the passages state the answer) ≥ the threshold, else
  the source lacks the answer (no rewrite: web when allowed, else abstain);
* ``similarity``: a knowledge-base round whose passages' best dense (cosine) similarity to the query is
  below it finds nothing — no grading or check call is spent (default 0: off). Cosines are on an
  embedder's own scale, so a fitted value is bound to the embedder it was fitted with
  (``similarity_embedder``) and is off over any other;
* ``stated_similarity_weight`` (w, default 0): the answer check's score is (1 − w)·P(stated) + w·the round's
  best dense similarity — the two signals that best separate answerable from unanswerable questions,
  weighed by a logistic regression at calibration; bound to ``similarity_embedder`` like the gate, and
  P(stated) alone without a similarity (web passages, another embedder);
* ``check_prior`` (default off): the check's P(stated) enters the score less its *prior* — the same check
  asked with no passage, how much "yes" the question draws on its own (:func:`check_value`): a model that
  says "yes" to any question looks less sure of the passages. A threshold set fitted on that value says so
  (bound to the embedder like w), so its thresholds are never applied to the bare check, nor the reverse;
* ``verified``: when the answer check is surer than this (P(stated) > it), the draft from the checked
  passages goes without a support call — its confidence is P(stated). The default 1.0 never skips.
* ``by_embedder``: the embedder-bound thresholds (gate, w, check_prior, stated, verified) fitted over *other* embedders
  than ``similarity_embedder`` — e.g. the Chinese collections' re-scored e5 similarity beside the English
  MiniLM one — so one artifact carries a gate per scale; :func:`thresholds_for` picks the set in force.

The defaults are 0.5 each (``verified`` 1.0), which is the argmax of the two-way decision: with hard labels
(probability 1 for the decoded label) the program routes exactly as it does without soft scores,
so an uncalibrated program keeps its measured behaviour, and ``selfrag compile``'s calibrate stage
is what moves each threshold, on labelled dev data, towards its stated objective. For the answer
threshold, 0.5 with hard labels means "answer when the support judge says fully or partially"
(confidence 1 or 0.5), which is the accept rule of :func:`programs.routing.route_after_critique`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from programs.scoring import SUPPORT_VALUE
from programs.types import AbstainReason, Passage


class EmbedderThresholds(BaseModel):
    """The thresholds bound to one embedder's similarity scale: the gate, the check score's weight w, and the
    stated / verified thresholds fitted with them. None: the main thresholds' stated / verified."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    similarity: float = Field(0.0, ge=0.0, le=1.0)
    stated_similarity_weight: float = Field(0.0, ge=0.0, lt=1.0)
    stated: float | None = Field(None, ge=0.0, le=1.0)
    verified: float | None = Field(None, ge=0.0, le=1.0)
    check_prior: bool = False  # the set's stated threshold was fitted on the check less its prior


EMBEDDER_BOUND = ("similarity", "stated_similarity_weight", "stated", "verified", "check_prior")
"""The :class:`Thresholds` fields an :class:`EmbedderThresholds` set replaces."""


class CragThresholds(BaseModel):
    """CorrectiveRAG's evaluator thresholds on its 0–10 passage score, and the score they apply to: some
    passage scoring ≥ ``upper`` makes the retrieval "correct", all scoring < ``lower`` "incorrect", else
    "ambiguous". ``score``: the expectation of the evaluator's probabilities over 0–10, or their argmax. The
    defaults are fitted for the expectation on 160 labelled passages of the local model
    (``bench/bench_crag_evaluator.py``); ``selfrag compile --program crag --calibrate`` fits them on yours."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    score: Literal["argmax", "expected"] = "expected"
    upper: float = Field(6.64, ge=0.0, le=10.0)
    lower: float = Field(5.84, ge=0.0, le=10.0)

    @model_validator(mode="after")
    def _ordered(self) -> "CragThresholds":
        if self.lower > self.upper:
            raise ValueError(f"the lower CRAG threshold ({self.lower:g}) must not exceed the upper one ({self.upper:g})")
        return self


PAPER_CRAG = CragThresholds(score="argmax", upper=7.0, lower=4.0)
"""The CRAG paper's thresholds, on the evaluator's argmax score."""

CRAG_DEFAULTS_BY_LANGUAGE: dict[str, CragThresholds] = {"zh": CragThresholds(upper=6.72, lower=5.93)}
"""Built-in CRAG thresholds for questions in a language, where :class:`CragThresholds`' defaults do not hold.
Chinese: fitted on all 160 labelled Chinese passages of the local model (the bundled CMRC relevance splits'
other-question negatives and the hard negatives of the Chinese worked example's derived data, train and dev, 40
each: the Chinese rows of ``bench/results/crag-evaluator-{train,dev}-rows.json`` and
``crag-evaluator-zh-hard-{train,dev}-rows.json``); the shared defaults trusted 0.10–0.22 of their irrelevant
passages, this pair 0.00–0.21 fitted on the other three (``bench/bench_crag_evaluator.py``, README)."""


class Thresholds(BaseModel):
    """Decision thresholds in [0, 1]; saved in a compiled artifact next to the dev curve they came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    retrieve: float = Field(0.5, ge=0.0, le=1.0, description="retrieve when P(retrieve) >= this (Self-RAG's delta)")
    relevance: float = Field(0.5, ge=0.0, le=1.0, description="keep a passage when P(relevant) >= this")
    answer: float = Field(0.5, ge=0.0, le=1.0, description="answer when the final candidate's confidence >= this")
    stated: float = Field(0.5, ge=0.0, le=1.0,
                          description="draft only when P(the passages state the answer) >= this (the answer check)")
    verified: float = Field(1.0, ge=0.0, le=1.0,
                            description="skip the support judge on the checked draft when P(stated) > this "
                                        "(1.0 = always judge)")
    similarity: float = Field(0.0, ge=0.0, le=1.0,
                              description="a knowledge-base round whose best dense similarity is below this finds "
                                          "nothing (no grading call); 0 = off")
    similarity_embedder: str = Field("", description="the embedder the similarity threshold was fitted with: "
                                                     "it applies only to a retriever with that embedder "
                                                     "('' = any)")
    stated_similarity_weight: float = Field(
        0.0, ge=0.0, lt=1.0, description="the answer check's score is (1 - w) * P(stated) + w * the round's best dense "
                                         "similarity, compared with the stated threshold (bound to "
                                         "similarity_embedder like the gate; 0 = P(stated) alone)")
    check_prior: bool = Field(False, description="the check's value is P(stated) less its prior (the check asked with "
                                                 "no passage: one call more), as the stated threshold was fitted "
                                                 "(bound to similarity_embedder like the gate)")
    by_embedder: dict[str, EmbedderThresholds] = Field(
        default_factory=dict, description="embedder name, or name@language (e5-small@zh) -> its own gate, w, "
                                          "stated and verified thresholds, in force over a retriever with that "
                                          "embedder (not similarity_embedder), for questions in that language")
    crag: CragThresholds | None = Field(None, description="CorrectiveRAG's evaluator thresholds fitted by its "
                                                          "calibrate stage, for questions in any language (None = "
                                                          "the built-in defaults: default_crag)")
    crag_by_language: dict[str, CragThresholds] = Field(
        default_factory=dict, description="question language (zh) -> CorrectiveRAG's evaluator thresholds fitted on "
                                          "questions in it, in force for those questions instead of crag")

    @model_serializer(mode="wrap")
    def _without_unset_crag(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """No ``crag`` / ``crag_by_language`` key while none is fitted: SelfRAG's thresholds, artifacts and
        manifests read as before."""
        data = handler(self)
        if isinstance(data, dict):
            if data.get("crag") is None:
                data.pop("crag", None)
            if not data.get("crag_by_language"):
                data.pop("crag_by_language", None)
        return data


ABSTAIN_REASONS: dict[str, str] = {
    "no_relevant_passage": "passages were retrieved and graded (after every rewrite and web round allowed), "
                           "but none reached the relevance threshold",
    "low_similarity": "no passage the knowledge base returned was close enough to the question (the best dense "
                      "similarity below the compiled similarity threshold, after every rewrite and web round allowed)",
    "no_answer_in_passages": "relevant passages were found, but the answer generator said they do not answer "
                             "the question for every candidate",
    "answer_not_stated": "relevant passages were found, but the answer check judged that they do not state the "
                         "answer (P(stated) below its threshold) and no web round was left",
    "unsupported": "the best candidate's most likely support label is 'no': the passages do not back the answer",
    "low_confidence": "the best candidate is (partly) supported — or passed the answer check with no support "
                      "judgement, its confidence then P(stated) — but its confidence is below the answer threshold",
    "web_failed": "the knowledge base had nothing usable and the web search fallback failed "
                  "(no key, rate limit, timeout, empty...); the trace step carries the error kind",
    "retrieval_failed": "the knowledge base could not be searched (store error, missing or empty collection)",
    "lm_error": "the LM calls needed for an answer failed (timeout, parse error, backend error)",
    "direct_unanswerable": "the question was routed to answer without retrieval and the model gave no answer",
}
"""What each abstain reason means (shown by ``ask``)."""


def default_crag(language: str | None = None) -> CragThresholds:
    """The built-in CRAG thresholds for questions in ``language`` (:data:`CRAG_DEFAULTS_BY_LANGUAGE`, else
    :class:`CragThresholds`' defaults)."""
    return CRAG_DEFAULTS_BY_LANGUAGE.get(language or "", CragThresholds())


def compiled_crag(th: Thresholds | None, language: str | None = None) -> CragThresholds | None:
    """The CRAG thresholds an artifact holds for questions in ``language``: its set for that language
    (``crag_by_language``), else its set for any language (``crag``), else None."""
    if th is None:
        return None
    return th.crag_by_language.get(language or "") or th.crag


def crag_thresholds(compiled: CragThresholds | None, score: str | None = None, upper: float | None = None,
                    lower: float | None = None, language: str | None = None) -> CragThresholds:
    """The CRAG thresholds in force for a question in ``language``: ``score`` / ``upper`` / ``lower`` set in the
    settings win, else the compiled artifact's (``compiled``, from :func:`compiled_crag`), else the built-in
    defaults (:func:`default_crag`). Thresholds fitted on one score do not hold for the other: choosing the
    argmax where they were fitted on the expectation falls back to the paper's 7 / 4 (:data:`PAPER_CRAG`), the
    reverse to the defaults. ValueError when a lower set in the settings ends above the upper in force (or the
    reverse)."""
    base = compiled or default_crag(language)
    if score is not None and score != base.score:
        base = PAPER_CRAG if score == "argmax" else default_crag(language)
    if upper is None and lower is None:
        return base
    upper = base.upper if upper is None else upper
    lower = base.lower if lower is None else lower
    if lower > upper:
        raise ValueError(f"program.crag_lower ({lower:g}) must not exceed program.crag_upper ({upper:g}); "
                         "one of them is the compiled artifact's or the default when the settings set only the other")
    return CragThresholds(score=base.score, upper=upper, lower=lower)


def embedder_key(embedder: str, language: str | None = None) -> str:
    """The :attr:`Thresholds.by_embedder` key of a set fitted over ``embedder`` on questions in ``language``
    (``"e5-small@zh"``; the embedder alone when the set holds for any language)."""
    return f"{embedder}@{language}" if language else embedder


def thresholds_for(th: Thresholds, embedder: str | None, language: str | None = None) -> Thresholds:
    """The thresholds in force over a retriever whose embedder is ``embedder``, for a question in ``language``:
    ``th`` itself when its gate is bound to that embedder (or to none), else the set ``th.by_embedder`` holds
    for ``embedder@language`` or else for ``embedder`` — ``th`` with that set's values as its own
    (``similarity_embedder`` = ``embedder``) — else ``th`` (its gate and w then stay off over this embedder:
    :func:`similarity_gate`). Cosines of one embedder sit on another scale in another language (Chinese
    question–passage pairs score higher on e5's), hence sets per language."""
    if th.similarity_embedder in ("", embedder) or embedder is None:
        return th
    key = next((k for k in (embedder_key(embedder, language), embedder) if k in th.by_embedder), None)
    if key is None:
        return th
    own = th.by_embedder[key]
    update = {name: getattr(own, name) for name in EMBEDDER_BOUND if getattr(own, name) is not None}
    return th.model_copy(update={**update, "similarity_embedder": embedder})


def with_embedder_set(base: Thresholds, key: str, fitted: Thresholds) -> Thresholds:
    """``base`` keeping its own embedder-bound thresholds, with ``fitted``'s (calibrated over an embedder:
    ``key`` from :func:`embedder_key`) stored as ``by_embedder[key]`` and ``fitted``'s other thresholds
    (retrieve, relevance, answer) taken."""
    own = EmbedderThresholds(**{name: getattr(fitted, name) for name in EMBEDDER_BOUND})
    rest = {name: getattr(fitted, name) for name in type(fitted).model_fields
            if name not in (*EMBEDDER_BOUND, "similarity_embedder", "by_embedder")}
    return base.model_copy(update={**rest, "by_embedder": {**base.by_embedder, key: own}})


# ---------------------------------------------------------------------- routing on soft scores
def should_retrieve(p_retrieve: float, th: Thresholds) -> bool:
    """Self-RAG's adaptive retrieval: retrieve when P(retrieve) ≥ δ. ``p_retrieve`` is the judge's
    P("yes") plus P("continue") (both mean "look it up")."""
    return _prob(p_retrieve, "p_retrieve") >= th.retrieve


def keep_passage(p_relevant: float, th: Thresholds) -> bool:
    """A graded passage goes on to answer drafting when P(relevant) ≥ the relevance threshold."""
    return _prob(p_relevant, "p_relevant") >= th.relevance


def should_answer(confidence: float, th: Thresholds) -> bool:
    """Answer with the final candidate when its confidence (:func:`candidate_confidence`) ≥ the answer threshold."""
    return _prob(confidence, "confidence") >= th.answer


def top_similarity(passages: list[Passage]) -> float | None:
    """The best dense similarity among ``passages`` (None when no passage carries one: web results,
    keyword-only retrieval, index nodes)."""
    values = [p.similarity for p in passages if p.similarity is not None]
    return max(values) if values else None


def stated_weight(th: Thresholds, embedder: str | None) -> float:
    """The similarity's weight in the answer check's score over a retriever whose embedder is ``embedder``:
    bound like the gate (:func:`similarity_gate`), 0 over another embedder."""
    return th.stated_similarity_weight if th.similarity_embedder in ("", embedder) else 0.0


NO_PASSAGE = "[1] (no passage was found)"
"""What the answer check is shown to measure its prior: no passage at all."""


def check_value(p_stated: float | None, p_prior: float | None, check_prior: bool) -> float | None:
    """The answer check's value the score is made of: P(stated), or with ``check_prior`` P(stated) less the
    prior P(stated | no passage) mapped back onto [0, 1], (P(stated) − prior + 1) / 2 — None when a call it
    needs failed (the check then decides nothing)."""
    if p_stated is None or (check_prior and p_prior is None):
        return None
    p = _prob(p_stated, "p_stated")
    return (p - _prob(p_prior, "p_prior") + 1.0) / 2.0 if check_prior else p


def stated_score(p_stated: float, top: float | None, weight: float) -> float:
    """The answer check's score: (1 − ``weight``)·P(stated) + ``weight``·``top`` (the round's best dense
    similarity, clipped to [0, 1]); P(stated) alone when ``weight`` is 0 or the round has no similarity.
    ``p_stated`` is the check's value (:func:`check_value`: less its prior when the thresholds say so)."""
    p = _prob(p_stated, "p_stated")
    if weight <= 0.0 or top is None:
        return p
    return (1.0 - weight) * p + weight * min(1.0, max(0.0, top))


def similarity_gate(th: Thresholds, embedder: str | None) -> float:
    """The similarity threshold in force over a retriever whose embedder is ``embedder`` (None =
    unknown): the threshold when it was fitted with that embedder or with none named, else 0 (off)."""
    if th.similarity <= 0.0 or th.similarity_embedder in ("", embedder):
        return th.similarity
    return 0.0


def too_dissimilar(top: float | None, gate: float) -> bool:
    """Whether a round's passages are too far from the query to grade: their best similarity ``top``
    is below ``gate`` (never when the gate is off or no passage has a similarity)."""
    return gate > 0.0 and top is not None and top < gate


def skips_grading(kb_grading: str, answer_check: bool, gate: float, passages: list[Passage]) -> bool:
    """Whether a round's passages go ungraded: ``kb_grading = "without_gate"``, the answer check on, a
    similarity gate in force (``gate`` > 0) and every passage from the dense search the gate judges (a web
    or keyword-only passage carries no similarity: it is graded)."""
    return (kb_grading == "without_gate" and answer_check and gate > 0.0 and bool(passages)
            and all(p.similarity is not None for p in passages))


def skips_support(p_stated: float | None, th: Thresholds) -> bool:
    """The answer check stands in for the support judge on the checked draft when P(stated) > ``verified``
    (strictly: the default 1.0 never skips, not even on a hard "yes")."""
    return p_stated is not None and _prob(p_stated, "p_stated") > th.verified


def final_abstain_reason(support: str | None, confidence: float, th: Thresholds) -> AbstainReason | None:
    """Why the final candidate is not given (None: it is answered). ``support`` is the argmax support
    label (None when the judgement failed): "no" or a failed judgement reads as ``unsupported``;
    a supported candidate under the threshold as ``low_confidence``."""
    if should_answer(confidence, th):
        return None
    return "low_confidence" if support in ("fully", "partially") else "unsupported"


# ---------------------------------------------------------------------- soft (expected) scores
def support_expectation(p_support: Mapping[str, float]) -> float:
    """E[support value] = P(fully) + 0.5·P(partially), over the support labels' distribution
    (normalised over the labels given, so scores read from label-restricted top log-probabilities
    that do not sum to 1 still compare). An empty or all-zero distribution counts as "no" (0)."""
    unknown = set(p_support) - set(SUPPORT_VALUE)
    if unknown:
        raise ValueError(f"unknown support label(s) {sorted(unknown)}; expected {sorted(SUPPORT_VALUE)}")
    total = sum(_prob(p, f"P({label})") for label, p in p_support.items())
    if total <= 0.0:
        return 0.0
    return sum(SUPPORT_VALUE[label] * p for label, p in p_support.items()) / total


def expected_usefulness(p_use: Mapping[int, float]) -> float:
    """E[usefulness] on the 1..5 scale from a distribution over the ratings (normalised over those given)."""
    bad = [r for r in p_use if r not in (1, 2, 3, 4, 5)]
    if bad:
        raise ValueError(f"usefulness ratings must be 1..5, got {bad}")
    total = sum(_prob(p, f"P(use={r})") for r, p in p_use.items())
    if total <= 0.0:
        raise ValueError("usefulness distribution has no mass")
    return sum(r * p for r, p in p_use.items()) / total


def usefulness_value(e_use: float | None) -> float:
    """Usefulness 1..5 mapped linearly to −1..1 as :data:`programs.scoring.USEFULNESS_VALUE` does
    ((u − 3) / 2; by linearity this also maps an expectation). None (failed judgement) is neutral 0."""
    if e_use is None:
        return 0.0
    if not 1.0 <= e_use <= 5.0:
        raise ValueError(f"expected usefulness must lie in 1..5, got {e_use}")
    return (e_use - 3.0) / 2.0


def expected_score(p_rel: float, p_sup: Mapping[str, float], e_use: float | None,
                   w_rel: float = 1.0, w_sup: float = 1.0, w_use: float = 0.5) -> float:
    """Self-RAG's soft candidate score: w_rel·P(relevant) + w_sup·(P(fully) + 0.5·P(partially)) + w_use·E[use],
    E[use] being the expected 1..5 rating mapped to −1..1. With hard labels (probability 1 on one label)
    it equals :func:`programs.scoring.candidate_score`."""
    return (w_rel * _prob(p_rel, "p_rel") + w_sup * support_expectation(p_sup)
            + w_use * usefulness_value(e_use))


def candidate_confidence(p_rel: float, p_sup: Mapping[str, float]) -> float:
    """How likely the candidate is a supported answer, in [0, 1]: P(relevant) × E[support value].

    The answer is right only when its evidence is on topic and backs it; taking the two judgements as
    independent gives the product. Usefulness is left out: it rates helpfulness, not truth."""
    return _prob(p_rel, "p_rel") * support_expectation(p_sup)


def _prob(value: float, name: str) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value}")
    return value
