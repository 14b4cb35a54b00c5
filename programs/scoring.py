"""Candidate scoring: score = w_rel·rel + w_sup·sup + w_use·use (Self-RAG's weighted critique)."""

from __future__ import annotations

from dataclasses import dataclass, field

from programs.types import Passage

SUPPORT_VALUE = {"fully": 1.0, "partially": 0.5, "no": 0.0}
USEFULNESS_VALUE = {1: -1.0, 2: -0.5, 3: 0.0, 4: 0.5, 5: 1.0}


@dataclass
class Candidate:
    """One answer drafted from one set of passages, with its critique."""

    answer: str
    passages: list[Passage]
    cited: list[Passage] = field(default_factory=list)
    relevant: bool = True
    support: str | None = None  # the support verdict; None when the judgement failed or never ran
    support_judged: bool = False  # whether the support judge ran (result.supported is then filled)
    usefulness: int | None = None
    origin: str = "kb"  # kb | regenerated | web | direct
    # Soft critique (Self-RAG's expectations): P(relevant) of the passages it was drafted from, the
    # support distribution and E[usefulness] on 1..5. None = not judged softly (hard labels are used).
    p_rel: float | None = None
    p_sup: dict[str, float] | None = None
    e_use: float | None = None
    p_answerable: float | None = None  # the drafter's P(answerable = true) (same call); None = not read
    # The answer check's P(stated) when it stood in for the support judge (above the ``verified``
    # threshold): the candidate's confidence and its support value in the score. None = not verified so.
    verified: float | None = None

    def score(self, w_rel: float = 1.0, w_sup: float = 1.0, w_use: float = 0.5) -> float:
        """w_rel·P(relevant) + w_sup·(P(fully) + 0.5·P(partially)) + w_use·E[use] (use mapped to −1..1);
        with hard labels (no probabilities) the same formula on the decoded labels."""
        verified_only = self.p_sup is None and self.verified is not None and not self.support_judged
        if self.p_sup is None and not verified_only:
            return candidate_score(self.relevant, self.support, self.usefulness, w_rel, w_sup, w_use)
        rel = self.p_rel if self.p_rel is not None else (1.0 if self.relevant else 0.0)
        sup = self.verified if verified_only else self._expected_support()
        if self.e_use is not None:
            use = (self.e_use - 3.0) / 2.0
        else:
            use = USEFULNESS_VALUE.get(self.usefulness, 0.0) if self.usefulness is not None else 0.0
        return w_rel * rel + w_sup * sup + w_use * use

    def _expected_support(self) -> float:
        """P(fully) + 0.5·P(partially) over the (normalised) support distribution ``p_sup``."""
        total = sum(self.p_sup.values()) or 1.0
        return sum(SUPPORT_VALUE.get(label, 0.0) * p for label, p in self.p_sup.items()) / total

    def confidence(self) -> float | None:
        """How far its passages back the answer: E[support] = P(fully) + 0.5·P(partially); None when the
        support judge never ran on it — unless the answer check verified its passages, then P(stated).
        (Relevance already gated the passages through its own threshold;
        on the local model P(relevant) is far from calibrated — dev ECE 0.35 — so multiplying it in
        would make the answer threshold track the relevance judge's scale instead of the evidence.)"""
        if not self.support_judged:
            return self.verified
        if self.p_sup is None:
            return SUPPORT_VALUE.get(self.support or "no", 0.0)
        return self._expected_support()


def candidate_score(
    relevant: bool, support: str | None, usefulness: int | None, w_rel: float = 1.0, w_sup: float = 1.0, w_use: float = 0.5
) -> float:
    """A failed judgement (None) counts as the neutral/lowest value: support 0, usefulness 0."""
    rel = 1.0 if relevant else 0.0
    sup = SUPPORT_VALUE.get(support or "no", 0.0)
    use = USEFULNESS_VALUE.get(usefulness, 0.0) if usefulness is not None else 0.0
    return w_rel * rel + w_sup * sup + w_use * use


def pick_best(candidates: list[Candidate], w_rel: float = 1.0, w_sup: float = 1.0, w_use: float = 0.5) -> Candidate | None:
    """Highest score wins; ties keep the earlier candidate (better-ranked passage)."""
    best: Candidate | None = None
    best_score = float("-inf")
    for cand in candidates:
        s = cand.score(w_rel, w_sup, w_use)
        if s > best_score:
            best, best_score = cand, s
    return best
