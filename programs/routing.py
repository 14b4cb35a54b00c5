"""Plain-Python routing decisions of the programs (SelfRAG, CorrectiveRAG): each returns a route label.

Kept free of DSPy so each branch can be tested without an LM (the LangGraph-tutorial idiom).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from programs.types import WebErrorKind

RetrieveMode = Literal["adaptive", "always", "never"]


def route_retrieval(mode: RetrieveMode, decision: str | None) -> Literal["retrieve", "direct"]:
    """`always`/`never` override the judge; in adaptive mode a failed judgement (None) retrieves,
    since answering without evidence is the riskier mistake."""
    if mode == "always":
        return "retrieve"
    if mode == "never":
        return "direct"
    return "direct" if decision == "no" else "retrieve"


def route_after_grading(
    n_relevant: int, rewrites_done: int, max_rewrites: int, web_rounds_done: int, max_web_rounds: int, has_web: bool,
    not_stated: bool = False, on_web: bool = False,
) -> Literal["generate", "rewrite", "web", "abstain"]:
    """What to do once a batch of passages has been graded (and, when on, the answer checked).

    ``not_stated``: relevant passages were found but the answer check says they do not state the answer.
    A rewrite fixes a query that missed the topic; here the topic was found and the source lacks the
    answer, so the round skips rewriting and goes to the web, else abstains.
    ``on_web``: the batch came from the web, where a rewritten query is searched next — so a rewrite
    only while a web round is left (none left: the rewrite would be spent on a query never searched)."""
    if n_relevant > 0 and not not_stated:
        return "generate"
    searchable = not on_web or (has_web and web_rounds_done < max_web_rounds)
    if rewrites_done < max_rewrites and not not_stated and searchable:
        return "rewrite"
    if has_web and web_rounds_done < max_web_rounds:
        return "web"
    return "abstain"


def route_after_critique(
    support: str | None, regenerations_done: int, max_regenerations: int,
    web_rounds_done: int, max_web_rounds: int, has_web: bool,
) -> Literal["accept", "regenerate", "web", "flag_unsupported"]:
    """An answer the support judge calls fully or partially supported is accepted; an unsupported
    one (or one whose judgement failed) is regenerated, then sent to the web, then returned flagged."""
    if support in ("fully", "partially"):
        return "accept"
    if regenerations_done < max_regenerations:
        return "regenerate"
    if has_web and web_rounds_done < max_web_rounds:
        return "web"
    return "flag_unsupported"


# ---------------------------------------------------------------------- CorrectiveRAG (CRAG)
CragAction = Literal["correct", "ambiguous", "incorrect"]

# Web failures worth another round with a different query; any other kind (auth, no_key, timeout,
# rate_limited after the backend's own retries...) would fail the same way again.
RETRYABLE_WEB_ERRORS: frozenset[WebErrorKind] = frozenset({"empty", "bad_request"})


def crag_action(scores: Sequence[float | None], upper: float, lower: float) -> CragAction:
    """CRAG's three-way split of the evaluator's passage scores (Yan et al. 2024, §4.3).

    "correct" when at least one passage scores >= ``upper``; "incorrect" when every passage scores
    < ``lower`` (no passage at all is incorrect too); otherwise "ambiguous". A failed evaluation
    (None) can never make the set "incorrect": unknown evidence is not evidence of irrelevance, so it
    lands in "ambiguous", which consults both the knowledge base and the web."""
    if any(s is not None and s >= upper for s in scores):
        return "correct"
    if all(s is not None and s < lower for s in scores):
        return "incorrect"
    return "ambiguous"


def crag_usable(score: float | None, lower: float) -> bool:
    """Whether a retrieved passage goes on to knowledge refinement: anything not judged incorrect
    (a failed evaluation included; the strip filter still has to keep each of its strips)."""
    return score is None or score >= lower


def route_after_web_round(
    n_kept: int, error_kind: WebErrorKind | None, rounds_left: int
) -> Literal["refined", "retry", "give_up"]:
    """After one web round: stop once refinement kept something; retry with a new keyword query when
    the failure can depend on the query (nothing found) and a round is left; otherwise give up.
    ``error_kind`` is the failed web step's :attr:`~programs.types.TraceStep.error_kind` (None: it succeeded)."""
    if n_kept > 0:
        return "refined"
    if error_kind is not None and error_kind not in RETRYABLE_WEB_ERRORS:
        return "give_up"
    return "retry" if rounds_left > 0 else "give_up"


def route_after_refinement(n_knowledge: int) -> Literal["generate", "abstain"]:
    """Answer from the refined knowledge if any strip survived; otherwise abstain honestly."""
    return "generate" if n_knowledge > 0 else "abstain"


# ---------------------------------------------------------------------- SelfRAG on soft scores
def route_retrieve_decision(mode: RetrieveMode, rule: str | None, p_retrieve: float | None,
                            threshold: float) -> Literal["retrieve", "direct"]:
    """Self-RAG's adaptive retrieval with cheap rules first: ``always``/``never`` override everything;
    a rule's verdict (``"yes"``/``"no"``) is final; otherwise retrieve when the judge's P(retrieve) ≥
    ``threshold``; a failed judgement (None) retrieves — answering without evidence is the riskier mistake."""
    if mode == "always":
        return "retrieve"
    if mode == "never":
        return "direct"
    if rule in ("yes", "no"):
        return "retrieve" if rule == "yes" else "direct"
    if p_retrieve is None:
        return "retrieve"
    return "retrieve" if p_retrieve >= threshold else "direct"


CONTINUE_PROBABILITY = 0.5  # "continue" when the retrieve judge finds it more likely than not


def route_continue(p_continue: float | None) -> Literal["continue", "stop"]:
    """Self-RAG's ``continue``: asked again with the draft as the answer so far, the retrieve judge
    says the draft needs more evidence (P(continue) ≥ 0.5) → answer-guided re-query rounds; a failed
    judgement (None) stops — the draft goes on to the answer check as it is."""
    return "continue" if p_continue is not None and p_continue >= CONTINUE_PROBABILITY else "stop"


def route_after_answer_check(
    answerable: bool, regenerations_done: int, max_regenerations: int,
    web_rounds_done: int, max_web_rounds: int, has_web: bool,
) -> Literal["accept", "regenerate", "web", "abstain"]:
    """The best candidate is answered when its confidence reaches the answer threshold
    (``answerable``); otherwise regenerate (bounded), then one more web round (bounded), then abstain."""
    if answerable:
        return "accept"
    if regenerations_done < max_regenerations:
        return "regenerate"
    if has_web and web_rounds_done < max_web_rounds:
        return "web"
    return "abstain"
