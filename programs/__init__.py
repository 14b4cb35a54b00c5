"""DSPy modules composing the signatures, their plain-Python routing, and artifact loading."""

from programs.selfrag import ABSTAIN_ANSWER, SelfRAG

__all__ = ["ABSTAIN_ANSWER", "SelfRAG"]

from programs.artifacts import ArtifactError, load_compiled  # noqa: E402

__all__ += ["ArtifactError", "load_compiled"]

from programs.crag import CorrectiveRAG  # noqa: E402

__all__ += ["CorrectiveRAG"]
