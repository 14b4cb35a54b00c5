"""Which relevant passages each draft reads: the first draft(s), and what a regeneration redrafts from.

Plain functions over ``(passage, P(relevant))`` pairs, testable without an LM. A regeneration never
repeats a context already drafted from: at temperature 0 the same prompt gives the same draft, so a
repeat would cost a draft and a support judgement for nothing. It takes, in order of P(relevant), the
first passage not yet drafted from alone (Self-RAG's one candidate per passage); when every
relevant passage has been tried alone, it returns None and the program samples the first context
again at a higher temperature.
"""

from __future__ import annotations

from programs.types import Passage

Scored = tuple[Passage, float]


def context_key(group: list[Scored]) -> frozenset[str]:
    """What identifies a draft's context: the ids of the passages it reads."""
    return frozenset(p.id for p, _ in group)


def by_relevance(relevant: list[Scored]) -> list[Scored]:
    """Most probable first; ties keep retrieval order (``sorted`` is stable)."""
    return sorted(relevant, key=lambda ps: -ps[1])


def first_contexts(relevant: list[Scored], max_candidates: int, draft_passages: int) -> list[list[Scored]]:
    """The first round's drafts: one joint draft from the ``draft_passages`` most probable passages,
    shown in retrieval order (so the draft starts with the grading call's evidence, a prefix llama.cpp
    reuses), when ``max_candidates == 1``; else one draft per passage, the ``max_candidates`` most probable."""
    if max_candidates == 1:
        best = {id(ps) for ps in by_relevance(relevant)[:draft_passages]}
        group = [ps for ps in relevant if id(ps) in best]
        return [group] if group else []
    return [[ps] for ps in by_relevance(relevant)[:max_candidates]]


def regeneration_context(relevant: list[Scored], tried: set[frozenset[str]]) -> list[Scored] | None:
    """The next context to redraft from: the most probable relevant passage not yet drafted from
    alone; None when every one has been (the caller then samples a tried context again)."""
    for ps in by_relevance(relevant):
        if context_key([ps]) not in tried:
            return [ps]
    return None
