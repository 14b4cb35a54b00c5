"""Every signature that writes text a user reads or a search runs on asks for the question's language
(a Chinese question searched with an English query misses a Chinese collection's passages)."""

import pytest

from signatures.answer import AnswerDirectly, GenerateAnswer
from signatures.iterative import NextQuery
from signatures.query_transforms import (ComposeAnswer, DecomposeQuestion, HypotheticalPassage, ParaphraseQuery,
                                         StepBackQuestion)
from signatures.rewrite import RewriteQuery


@pytest.mark.parametrize("signature", [GenerateAnswer, AnswerDirectly, ComposeAnswer, RewriteQuery, NextQuery,
                                       ParaphraseQuery, DecomposeQuestion, StepBackQuestion, HypotheticalPassage])
def test_it_asks_for_the_language_of_the_question(signature):
    assert "language of the question" in " ".join(signature.instructions.split())


def test_a_direct_answer_may_be_asked_for_in_another_language():
    # "translate this into English" asked in Chinese wants English back
    assert "unless it asks for another language" in " ".join(AnswerDirectly.instructions.split())
