"""Typed DSPy signatures: declarations only. Each docstring is the instruction an optimizer rewrites."""

from signatures.answer import AnswerDirectly, GenerateAnswer
from signatures.answer_check import CheckAnswerStated
from signatures.crag import EvaluateRetrieval, FilterStrip, RewriteWebQuery
from signatures.indexing import HypotheticalQuestions, SummarizeTexts
from signatures.iterative import NextQuery
from signatures.query_transforms import (AnswerSubQuestion, ComposeAnswer, DecomposeQuestion, HypotheticalPassage,
                                        ParaphraseQuery, StepBackQuestion)
from signatures.relevance import GradeRelevance
from signatures.relevance_batch import GradeRelevanceBatch, PassageVerdict
from signatures.rerank import RerankPassages
from signatures.retrieve import RetrieveDecision
from signatures.rewrite import RewriteQuery
from signatures.routing import ExtractFilters, FilterCondition, RouteCollections
from signatures.support import JudgeSupport
from signatures.usefulness import JudgeUsefulness

__all__ = [
    "AnswerDirectly",
    "AnswerSubQuestion",
    "CheckAnswerStated",
    "ComposeAnswer",
    "DecomposeQuestion",
    "EvaluateRetrieval",
    "ExtractFilters",
    "FilterCondition",
    "FilterStrip",
    "GenerateAnswer",
    "GradeRelevance",
    "GradeRelevanceBatch",
    "HypotheticalPassage",
    "HypotheticalQuestions",
    "JudgeSupport",
    "JudgeUsefulness",
    "NextQuery",
    "ParaphraseQuery",
    "PassageVerdict",
    "RerankPassages",
    "RetrieveDecision",
    "RewriteQuery",
    "RewriteWebQuery",
    "RouteCollections",
    "StepBackQuestion",
    "SummarizeTexts",
]
