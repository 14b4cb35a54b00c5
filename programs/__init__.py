"""DSPy modules composing the signatures, their plain-Python routing, and artifact loading."""

from programs.selfrag import ABSTAIN_ANSWER, SelfRAG

__all__ = ["ABSTAIN_ANSWER", "SelfRAG"]
