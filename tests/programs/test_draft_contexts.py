"""Which passages each draft reads, and that a regeneration never repeats a context."""

from programs.draft_contexts import context_key, first_contexts, regeneration_context
from programs.types import Passage


def _scored(*probs: float) -> list[tuple[Passage, float]]:
    return [(Passage(id=f"p{i}", text=f"text {i}"), p) for i, p in enumerate(probs)]


def test_joint_draft_takes_the_most_probable_in_retrieval_order():
    rel = _scored(0.2, 0.9, 0.5, 0.7)
    (group,) = first_contexts(rel, max_candidates=1, draft_passages=2)
    assert [p.id for p, _ in group] == ["p1", "p3"]  # the two most probable, retrieval order kept


def test_one_draft_per_passage_when_several_candidates():
    groups = first_contexts(_scored(0.2, 0.9, 0.5), max_candidates=2, draft_passages=3)
    assert [[p.id for p, _ in g] for g in groups] == [["p1"], ["p2"]]


def test_no_relevant_passage_no_context():
    assert first_contexts([], max_candidates=1, draft_passages=3) == []


def test_regeneration_takes_the_next_untried_single_passage():
    rel = _scored(0.3, 0.9, 0.6)
    tried = {context_key(first_contexts(rel, 1, 3)[0])}  # the joint draft of all three
    first = regeneration_context(rel, tried)
    assert [p.id for p, _ in first] == ["p1"]
    tried.add(context_key(first))
    assert [p.id for p, _ in regeneration_context(rel, tried)] == ["p2"]


def test_regeneration_none_when_every_passage_was_drafted_alone():
    rel = _scored(0.8)
    tried = {context_key(first_contexts(rel, 1, 3)[0])}  # a joint draft of one passage = that passage alone
    assert regeneration_context(rel, tried) is None
