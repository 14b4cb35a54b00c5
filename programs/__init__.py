"""DSPy programs over the signatures: one base (:class:`RAGModule`), the programs, their routing and artifacts.

Layering: ``programs`` imports ``signatures`` and nothing of the runtime (``selfrag``); the runtime
injects the retriever, web search and LMs through the constructors. The names below are imported on
first use, so ``import programs`` (e.g. for :class:`~programs.settings.ProgramSettings`) stays cheap.

    ``RAGModule``            programs.base        the shared base and its plumbing
    ``SelfRAG``              programs.selfrag     Self-RAG reflection
    ``CorrectiveRAG``        programs.crag        corrective retrieval (CRAG)
    ``VanillaRAG``, ``NoRetrieval``, ``GradedRAG``   programs.baselines
    ``ABSTAIN_ANSWER``, ``format_passages``         programs.passages
    ``ArtifactError``        programs.artifacts   compiled-artifact save / check / load of state
    ``program_class``        programs.registry    a registered name → its class
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RAGModule": "programs.base",
    "SelfRAG": "programs.selfrag",
    "CorrectiveRAG": "programs.crag",
    "VanillaRAG": "programs.baselines",
    "NoRetrieval": "programs.baselines",
    "GradedRAG": "programs.baselines",
    "ABSTAIN_ANSWER": "programs.passages",
    "format_passages": "programs.passages",
    "ArtifactError": "programs.artifacts",
    "program_class": "programs.registry",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'programs' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
