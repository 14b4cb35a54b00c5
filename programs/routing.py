"""Plain-Python routing decisions of the SelfRAG program: each returns a route label.

Kept free of DSPy so each branch can be tested without an LM (the LangGraph-tutorial idiom).
"""

from __future__ import annotations

from typing import Literal

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
    n_relevant: int, rewrites_done: int, max_rewrites: int, web_rounds_done: int, max_web_rounds: int, has_web: bool
) -> Literal["generate", "rewrite", "web", "abstain"]:
    """What to do once a batch of passages has been graded."""
    if n_relevant > 0:
        return "generate"
    if rewrites_done < max_rewrites:
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
