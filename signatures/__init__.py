"""Typed DSPy signatures: declarations only. Each docstring is the instruction an optimizer rewrites."""

from signatures.answer import AnswerDirectly, GenerateAnswer
from signatures.crag import EvaluateRetrieval, FilterStrip, RewriteWebQuery
from signatures.relevance import GradeRelevance
from signatures.relevance_batch import GradeRelevanceBatch, PassageVerdict
from signatures.retrieve import RetrieveDecision
from signatures.rewrite import RewriteQuery
from signatures.support import JudgeSupport
from signatures.usefulness import JudgeUsefulness

__all__ = [
    "AnswerDirectly",
    "EvaluateRetrieval",
    "FilterStrip",
    "GenerateAnswer",
    "GradeRelevance",
    "GradeRelevanceBatch",
    "JudgeSupport",
    "JudgeUsefulness",
    "PassageVerdict",
    "RetrieveDecision",
    "RewriteQuery",
    "RewriteWebQuery",
]
