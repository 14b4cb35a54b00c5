"""The programs' own settings: behaviour, weights and the bound of every loop.

A plain pydantic model (no environment, no file): the runtime's :class:`selfrag.settings.Settings`
embeds it as its ``[program]`` section and passes the resolved object to the program's constructor.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from programs.registry import PROGRAM_NAMES


class ProgramSettings(BaseModel):
    """SelfRAG behaviour and its bounds. Every loop in the program is bounded by one of these."""

    model_config = ConfigDict(extra="forbid")

    strategy: str = "selfrag"  # a name in programs.registry: Self-RAG reflection, corrective retrieval (CRAG), a baseline
    retrieve_mode: Literal["adaptive", "always", "never"] = "adaptive"
    k: int = Field(3, ge=1, le=20)  # passages a draft may read (with draft_passages) and web results per round
    # (at most: the web search's own web.max_results caps them)
    # Candidates retrieved and graded per round (SelfRAG); None = k. Each graded passage costs ~120 prompt
    # tokens of the batched grading call; recall of the gold passage on ClapNQ dev (hybrid) is flat from 2
    # to 5 graded candidates (0.94) and 0.96 at 6 (bench/bench_grade_pool.py).
    grade_pool: int | None = Field(None, ge=1, le=50)
    # 1: one draft from the top relevant passages together (cheapest); N > 1: Self-RAG's one draft per
    # relevant passage (at most N), each critiqued, the best by soft score wins.
    max_candidates: int = Field(1, ge=1, le=20)
    draft_passages: int = Field(3, ge=1, le=20)  # relevant passages one joint draft reads
    grading: Literal["batched", "per_passage"] = "batched"  # one call grades all passages, or one call each
    # SelfRAG's grading of knowledge-base passages: "always", or "without_gate" — only when no similarity gate
    # is in force. With a fitted gate for the collection's embedder and the answer check on, a round's dense
    # passages are kept ungraded: the gate stops far rounds and the check decides the rest (on ClapNQ dev:
    # the same F1 and false abstention, more abstention, 27% fewer prompt tokens; README "Grading"). Web
    # passages are always graded.
    kb_grading: Literal["always", "without_gate"] = "without_gate"
    grade_chars: int = Field(450, ge=100)  # the window of each passage (around the query terms) the relevance judge reads
    retrieve_rules: bool = True  # cheap rules decide obvious retrieve/no-retrieve questions before the judge
    # Decision thresholds on the soft scores (None = the compiled artifact's, else programs.thresholds defaults).
    retrieve_threshold: float | None = Field(None, ge=0.0, le=1.0)
    relevance_threshold: float | None = Field(None, ge=0.0, le=1.0)
    answer_threshold: float | None = Field(None, ge=0.0, le=1.0)
    stated_threshold: float | None = Field(None, ge=0.0, le=1.0)
    verified_threshold: float | None = Field(None, ge=0.0, le=1.0)  # skip support when P(stated) > this
    similarity_threshold: float | None = Field(None, ge=0.0, le=1.0)  # min best dense similarity (0 = off)
    stated_similarity_weight: float | None = Field(None, ge=0.0, lt=1.0)  # the similarity's share of the check's score
    # SelfRAG's answer check: before drafting, one call asks whether the draft's passages state the answer
    # (signatures.CheckAnswerStated); below the ``stated`` threshold no draft is made: the web when allowed,
    # else abstain (programs.routing.route_after_grading). On ClapNQ dev it separates answerable from unanswerable questions far better than
    # the support judge's confidence (bench/bench_answerability.py).
    answer_check: bool = True
    judge_usefulness: Literal["always", "multiple"] = "multiple"  # "multiple": only to rank several candidates
    token_budget: int | None = Field(None, ge=100)  # prompt tokens per question; optional steps drop to fit
    max_rewrites: int = Field(1, ge=0, le=5)
    max_web_rounds: int = Field(1, ge=0, le=5)
    max_regenerations: int = Field(1, ge=0, le=5)
    w_rel: float = 1.0
    w_sup: float = 1.0
    w_use: float = 0.5
    # A longer question is refused before any LM call: it would overflow every judgement's prompt.
    max_question_chars: int = Field(2000, ge=10, le=100_000)
    num_threads: int = Field(1, ge=1, le=32)  # parallel LM calls (1 for an in-process model)
    # The window of each passage a draft and its judges read (around the query terms). 900 shows a whole
    # 800-character chunk: a 450 window held >= 80% of the gold answer for only 33-40% of answerable ClapNQ
    # questions (bench/bench_passage_window.py); 900 gave F1 +0.02 on ClapNQ and CMRC dev at the same
    # abstention and latency, ~20% more prompt tokens (README "How much of the passage the judges read").
    passage_chars: int = Field(900, ge=100)
    # CorrectiveRAG (CRAG): the evaluator scores each passage 0-10; some score >= the upper threshold means
    # "correct", every score < the lower one "incorrect", anything else "ambiguous". A passage's score is
    # the expectation of the evaluator's probabilities over 0-10 ("expected") or their argmax. On the local
    # model the expectation tells relevant from irrelevant passages far better (ROC AUC 0.86-0.96 against
    # 0.48-0.86 on the relevance splits) but lives in a narrow band (~4-7.5), so its thresholds are fitted.
    # None = the compiled artifact's (`selfrag compile --program crag --calibrate`), else
    # programs.thresholds.CragThresholds' defaults: the expectation at 6.64 / 5.84, fitted on 160 labelled
    # passages, and 6.72 / 5.93 for Chinese questions (programs.thresholds.CRAG_DEFAULTS_BY_LANGUAGE;
    # bench/bench_crag_evaluator.py, README "Corrective retrieval"); "argmax" alone takes the paper's 7 / 4
    # (programs.thresholds.crag_thresholds). A value set here holds for questions in every language.
    crag_score: Literal["argmax", "expected"] | None = None
    crag_upper: float | None = Field(None, ge=0, le=10)
    crag_lower: float | None = Field(None, ge=0, le=10)
    max_strips: int = Field(8, ge=1, le=100)  # strip judgements per refinement (KB, each web round)
    # Retrieval strategies (programs/retrieval_pipeline.py, in programs built with StrategyRetrieval):
    # query transforms fused with the question's ranking by RRF, collection routing, self-query, rerank.
    transforms: list[Literal["multi_query", "decompose", "step_back", "hyde"]] = Field(default_factory=list)
    max_paraphrases: int = Field(3, ge=1, le=10)  # multi_query
    max_subquestions: int = Field(3, ge=1, le=8)  # decompose
    fusion_k: int = Field(60, ge=1)  # RRF k of the transforms' fusion
    route_collections: bool = False  # needs a CollectionsRetriever
    max_routes: int = Field(2, ge=1, le=10)
    self_query: bool = False  # needs the collection's metadata schema
    rerank: Literal["none", "auto", "judge", "listwise"] = "none"
    rerank_pool: int = Field(12, ge=2, le=50)  # fused candidates the reranker orders
    # IterativeRAG (programs/iterative.py) and SelfRAG's "continue": re-query rounds and when to stop.
    # SelfRAG: a draft below the answer threshold is shown to the retrieve judge (answer_so_far); its
    # "continue" starts answer-guided re-query rounds (programs.iterative.iterate_retrieval).
    # Opt-in: it costs a judge call (~200 prompt tokens) on every low-confidence draft, and rounds after it.
    continue_retrieval: bool = False
    max_iterations: int = Field(3, ge=1, le=10)  # retrieval rounds, the first included
    iteration_confident: Literal["fully", "partially"] = "fully"  # support that stops the rounds

    @field_validator("transforms")
    @classmethod
    def _unique_transforms(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str) -> str:
        if value not in PROGRAM_NAMES:
            raise ValueError(f"unknown strategy {value!r}; choose one of: {', '.join(PROGRAM_NAMES)}")
        return value

    @model_validator(mode="after")
    def _crag_thresholds_ordered(self) -> "ProgramSettings":
        if self.crag_lower is not None and self.crag_upper is not None and self.crag_lower > self.crag_upper:
            raise ValueError(f"program.crag_lower ({self.crag_lower}) must not exceed program.crag_upper ({self.crag_upper})")
        return self
