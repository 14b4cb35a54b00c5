"""The training-data builder: from a user's QA items and their collection, labelled records for every
judgement and the answer signature, each with the provenance of how it was made.

Per answerable question (``Q``, gold answer ``A``), with the collection's retriever (``k`` passages):

- gold passage ``G``: with ``gold_doc_ids`` / ``gold_sources``, the chunk of a gold document (retrieved
  for ``Q``, or fetched with a filter on that document) holding most of ``A``'s content words
  (``how = gold_doc``); without them, the best-ranked retrieved chunk that holds ``A``
  (:func:`optimize.derive_labels.holds_answer`, ``how = answer_span``). No ``G`` → the question is
  skipped, with the reason.
- hard negative ``N``: the best-ranked retrieved chunk of another document that does not hold ``A``
  (under half its content words, not the span).
- ``relevance``: ``(Q, G)`` relevant, ``(Q, N)`` irrelevant.
- ``support``: ``(G, A)`` fully; ``(N, A)`` no (unrelated passage); ``(G, A + a sentence of N that G does
  not back)`` partially; ``(G, A with a number or name changed)`` no. The claim not backed is recorded
  (``unsupported_claim``) for the feedback metric.
- ``usefulness``: ``A`` 5; an evasive reply or another same-split question's answer 1 (by hash).
- ``retrieve``: ``Q`` yes; the bundled hand-written no-retrieval questions (arithmetic, chit-chat,
  rewriting) no, in the QA file's languages, at most as many as yes (at least 8).
- ``answer``: ``Q`` with ``G`` and ``N`` (order by hash) → ``A``, citing ``G``; an unanswerable question
  with its top two passages → abstain.
- ``qa``: every question (answerable or not), for end-to-end compiling, calibration and evaluation.

Every record has ``id``, ``group`` (the question's: same question, same split), ``source`` (``user`` or
``selfrag-handwritten``), ``how``, ``provenance`` and ``decides`` (what decides its label, in words).
Train/dev: :func:`assign_splits` (seeded hash of the group, 25 % dev; with two or more groups neither
split is left empty).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from optimize.derive_labels import changed_answer, evidence_sentence, holds_answer, partial_answer, unbacked_claim
from optimize.errors import DataError
from optimize.metrics import has_cjk
from optimize.qa_format import Catalog, QAItem
from optimize.records import MAX_ANSWER_OVERLAP, evasive_answer, numbered_passages, truncate
from optimize.sources import normalize_question, split_of, stable_hash
from programs.passages import ABSTAIN_ANSWER, passage_ref
from programs.types import Passage

DERIVE_K = 8  # passages retrieved per question (the hard-negative pool)
GOLD_K = 3  # chunks fetched per gold document
MIN_NO_RETRIEVAL = 8
TASKS = ("retrieve", "relevance", "support", "usefulness", "answer", "qa")
LABEL_FIELD = {"retrieve": "decision", "relevance": "relevance", "support": "support", "usefulness": "usefulness",
               "answer": "answerable", "qa": "answerable"}


@dataclass
class Derived:
    records: dict[str, list[dict]]
    splits: dict[str, str]  # group → "train" | "dev"
    skipped: list[dict] = field(default_factory=list)  # {"line", "id", "reason"}
    questions: int = 0

    def counts(self) -> dict[str, dict[str, dict[str, int]]]:
        """task → split → label → count."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for task, recs in self.records.items():
            per: dict[str, Counter] = {"train": Counter(), "dev": Counter()}
            for r in recs:
                per[self.splits[r["group"]]][str(r[LABEL_FIELD[task]]).lower()] += 1
            out[task] = {s: dict(sorted(c.items())) for s, c in per.items()}
        return out

    def provenance(self) -> dict[str, dict[str, int]]:
        """task → how → count."""
        return {task: dict(sorted(Counter(r.get("how", "") for r in recs).items()))
                for task, recs in self.records.items()}


def assign_splits(groups: Iterable[str]) -> dict[str, str]:
    """Each group to ``split_of(group)``; with two or more groups, when one split would be empty the
    group with the lowest (for dev) / highest (for train) seeded hash moves there."""
    groups = sorted(set(groups), key=lambda g: (stable_hash(g), g))
    out = {g: split_of(g) for g in groups}
    if len(groups) >= 2:
        if "dev" not in out.values():
            out[groups[0]] = "dev"
        if "train" not in out.values():
            out[groups[-1]] = "train"
    return out


def _language(text: str) -> str:
    return "zh" if has_cjk(text) else "en"


def _words(text: str) -> set[str]:
    return {w for w in normalize_question(text).split() if len(w) > 2}


class _Builder:
    def __init__(self, retriever: Any, catalog: Catalog, k: int, max_chars: int):
        self.retriever, self.catalog, self.k, self.max_chars = retriever, catalog, k, max_chars
        self.out: dict[str, list[dict]] = {t: [] for t in TASKS}

    def text(self, p: Passage) -> str:
        return truncate(p.text, self.max_chars)

    # -- gold passage and hard negative ------------------------------------------------------------
    def gold(self, item: QAItem, retrieved: list[Passage]) -> tuple[Passage | None, dict, set[str]]:
        """``(G, its provenance, the passage ids of the gold documents)``; G None with a reason."""
        answer = item.answers[0]
        if item.has_gold:
            refs = self.catalog.gold_refs(item)
            if not refs:
                return None, {"reason": "none of its gold documents is in the collection"}, refs
            pool = [p for p in retrieved if passage_ref(p) in refs]
            for f in self.catalog.gold_filters(item):
                pool += self.retriever.retrieve(item.question, k=GOLD_K, filters=f)
            pool = list({p.id: p for p in pool}.values())
            if not pool:
                return None, {"reason": "its gold documents could not be retrieved"}, refs
            best = max(range(len(pool)), key=lambda i: (holds_answer(pool[i].text, answer)[1], -i))
            p = pool[best]
            return p, {"how": "gold_doc", "ref": passage_ref(p), "source": p.source,
                       "answer_overlap": holds_answer(p.text, answer)[1],
                       "rank": next((i + 1 for i, r in enumerate(retrieved) if r.id == p.id), None)}, refs
        for rank, p in enumerate(retrieved, 1):
            held, overlap = holds_answer(p.text, answer)
            if held:
                return p, {"how": "answer_span", "ref": passage_ref(p), "source": p.source, "answer_overlap": overlap,
                           "rank": rank}, {passage_ref(p)}
        return None, {"reason": f"none of the {len(retrieved)} retrieved passages holds an answer"}, set()

    def negative(self, item: QAItem, retrieved: list[Passage], gold: Passage, refs: set[str]) -> tuple[Passage, dict] | None:
        for rank, p in enumerate(retrieved, 1):
            if passage_ref(p) in refs or p.id == gold.id or (p.source and p.source == gold.source):
                continue
            overlaps = [holds_answer(p.text, a) for a in item.answers]
            if any(h for h, _ in overlaps) or max(o for _, o in overlaps) >= MAX_ANSWER_OVERLAP:
                continue
            return p, {"how": "hard_negative", "ref": passage_ref(p), "source": p.source, "rank": rank,
                       "answer_overlap": max(o for _, o in overlaps)}
        return None

    # -- records -----------------------------------------------------------------------------------
    def add(self, task: str, record: dict) -> None:
        self.out[task].append(record)

    def answerable(self, item: QAItem, gold: Passage, gprov: dict, neg: tuple[Passage, dict] | None) -> None:
        g, a, q = self.text(gold), item.answers[0], item.question
        common = {"group": item.group, "source": "user", "question": q}
        shown = evidence_sentence(g, a)
        self.add("relevance", {**common, "id": f"rel:{item.id}:pos", "passage": g, "title": gold.title,
                               "relevance": "relevant", "how": gprov["how"], "provenance": gprov,
                               "decides": f"The passage answers the question: «{shown}»"})
        self.add("support", {**common, "id": f"sup:{item.id}:fully", "passages": numbered_passages([g]), "answer": a,
                             "support": "fully", "how": "gold_answer", "provenance": gprov,
                             "decides": f"The passage states the answer: «{shown}»"})
        if neg is not None:
            n_passage, nprov = neg
            n = self.text(n_passage)
            self.add("relevance", {**common, "id": f"rel:{item.id}:neg", "passage": n, "title": n_passage.title,
                                   "relevance": "irrelevant", "how": "hard_negative", "provenance": nprov,
                                   "decides": "The passage was retrieved for the question but is from another "
                                              f"document and holds none of its answer ({a[:160]!r})"})
            self.add("support", {**common, "id": f"sup:{item.id}:no", "passages": numbered_passages([n]), "answer": a,
                                 "support": "no", "how": "unrelated_passage", "provenance": nprov,
                                 "unsupported_claim": a, "decides": "The passage (another document) does not state "
                                                                    "the answer at all"})
            claim = unbacked_claim(n, g, a)
            if claim is not None:
                self.add("support", {**common, "id": f"sup:{item.id}:partially", "passages": numbered_passages([g]),
                                     "answer": partial_answer(a, claim), "support": "partially",
                                     "how": "partial_answer", "unsupported_claim": claim,
                                     "provenance": {**gprov, "claim_from": nprov["ref"]},
                                     "decides": f"The answer's first part is in the passage; the claim «{claim}» "
                                                "is not"})
            change = changed_answer(a, g, n, item.id)
            if change is not None:
                self.add("support", {**common, "id": f"sup:{item.id}:changed", "passages": numbered_passages([g]),
                                     "answer": change.answer, "support": "no", "how": f"changed_{change.kind}",
                                     "unsupported_claim": change.claim,
                                     "provenance": {**gprov, "changed": [change.old, change.new]},
                                     "decides": f"The passage says {change.old!r}, the answer says {change.new!r}"})
            first_gold = int(stable_hash(f"answer-order:{item.group}")[:8], 16) % 2 == 0
            order = [g, n] if first_gold else [n, g]
            self.add("answer", {**common, "id": f"ans:{item.id}", "passages": numbered_passages(order), "answer": a,
                                "answers": list(item.answers), "citations": [1 if first_gold else 2],
                                "answerable": True, "how": "gold_with_negative",
                                "provenance": {"gold": gprov["ref"], "negative": nprov["ref"]},
                                "decides": f"Passage [{1 if first_gold else 2}] states the answer: «{shown}»"})
        self.add("usefulness", {**common, "id": f"use:{item.id}:gold", "answer": a, "usefulness": 5, "kind": "gold",
                                "how": "gold_answer", "provenance": {"answer_of": item.id},
                                "decides": "It answers the question directly"})
        self.add("retrieve", {**common, "id": f"rd:{item.id}", "answer_so_far": "", "decision": "yes",
                              "how": "qa_question", "provenance": {"qa_id": item.id},
                              "decides": "It asks for specific facts that are in the user's documents"})

    def unanswerable(self, item: QAItem, retrieved: list[Passage]) -> None:
        top = [self.text(p) for p in retrieved[:2]]
        if top:
            self.add("answer", {"group": item.group, "source": "user", "question": item.question,
                                "id": f"ans:{item.id}", "passages": numbered_passages(top), "answer": ABSTAIN_ANSWER,
                                "answers": [], "citations": [], "answerable": False, "how": "qa_unanswerable",
                                "provenance": {"retrieved": [passage_ref(p) for p in retrieved[:2]]},
                                "decides": "The QA file marks the question as not answered by the documents"})


def _usefulness_negatives(builder: _Builder, answered: list[QAItem], splits: dict[str, str]) -> None:
    """Per answered question, an evasive reply or (for half the groups, by hash) the answer of the least
    similar other question of the same split, when that answer does not answer this one."""
    for item in answered:
        common = {"group": item.group, "source": "user", "question": item.question}
        off = None
        if int(stable_hash(f"use-kind:{item.group}")[:8], 16) % 2 == 0:
            mine = _words(item.question)
            same = [o for o in answered if o.group != item.group and splits[o.group] == splits[item.group]
                    and not holds_answer(o.answers[0], item.answers[0])[0]
                    and holds_answer(o.answers[0], item.answers[0])[1] < MAX_ANSWER_OVERLAP]
            same.sort(key=lambda o: (len(mine & _words(o.question)) / (len(mine | _words(o.question)) or 1), o.id))
            far = same[: max(1, len(same) // 2)]
            if far:
                off = sorted(far, key=lambda o: stable_hash(f"{item.group}>{o.group}"))[0]
        if off is not None:
            builder.add("usefulness", {**common, "id": f"use:{item.id}:off_topic", "answer": off.answers[0],
                                       "usefulness": 1, "kind": "off_topic", "how": "off_topic",
                                       "provenance": {"answer_of": off.id},
                                       "decides": f"It answers a different question ({off.question!r})"})
        else:
            builder.add("usefulness", {**common, "id": f"use:{item.id}:evasive", "answer": evasive_answer(item.group),
                                       "usefulness": 1, "kind": "evasive", "how": "evasive",
                                       "provenance": {"template": "optimize.records.EVASIVE_ANSWERS"},
                                       "decides": "It dodges the question without giving any information"})


def no_retrieval_records(no_questions: Sequence[dict], languages: set[str], n_yes: int) -> list[dict]:
    """The bundled no-retrieval questions in ``languages``, a seeded sample of at most
    ``max(n_yes, MIN_NO_RETRIEVAL)``, as retrieve "no" records."""
    pool = [r for r in no_questions if r.get("decision") == "no" and _language(r["question"]) in languages]
    pool.sort(key=lambda r: stable_hash("no-retrieval:" + str(r["id"])))
    return [{"id": f"rd:{r['id']}", "group": f"rd:{r['id']}", "source": "selfrag-handwritten",
             "question": r["question"], "answer_so_far": r.get("answer_so_far", ""), "decision": "no",
             "how": "bundled_no_retrieval", "provenance": {"file": "data/retrieve_decision.jsonl", "id": r["id"]},
             "decides": "It can be answered without any document (arithmetic, conversation or rewriting a given "
                        "text)"} for r in pool[: max(n_yes, MIN_NO_RETRIEVAL)]]


def derive_records(items: Sequence[QAItem], retriever: Any, catalog: Catalog, no_questions: Sequence[dict], *,
                   k: int = DERIVE_K, max_chars: int = 1500, collection: str = "the collection") -> Derived:
    """Labelled records of every task from ``items`` (see the module docstring).

    Raises :class:`DataError` when there is no answerable question, when the collection holds none of
    the gold documents, or when no question got a gold passage."""
    answerable = [it for it in items if it.answerable]
    if not answerable:
        raise DataError("no answerable question: every 'answers' list is empty")
    with_gold = [it for it in answerable if it.has_gold]
    if with_gold and not any(catalog.gold_refs(it) for it in with_gold):
        example = with_gold[0]
        named = ", ".join(repr(x) for x in (*example.gold_doc_ids, *example.gold_sources))
        raise DataError(f"{collection} holds none of the gold documents of the QA file (line {example.line}: "
                        f"{named}); ingest them into it, or fix gold_doc_ids / gold_sources")
    builder = _Builder(retriever, catalog, k, max_chars)
    skipped: list[dict] = []
    answered: list[QAItem] = []
    gold_refs: dict[str, set[str]] = {}
    for item in items:
        retrieved = list(retriever.retrieve(item.question, k=k))
        if not item.answerable:
            builder.unanswerable(item, retrieved)
            continue
        gold, gprov, refs = builder.gold(item, retrieved)
        if gold is None:
            skipped.append({"line": item.line, "id": item.id, "reason": gprov["reason"]})
            continue
        gold_refs[item.id] = refs
        answered.append(item)
        builder.answerable(item, gold, gprov, builder.negative(item, retrieved, gold, refs))
    if not answered:
        raise DataError(f"no question got a gold passage from {collection} (first: line {skipped[0]['line']}, "
                        f"{skipped[0]['reason']})")
    kept = [it for it in items if it.id in gold_refs or not it.answerable]
    builder.out["qa"] = [it.record(gold_refs.get(it.id, ())) for it in kept]
    for r in builder.out["qa"]:
        r.update(how="qa_file", provenance={"line": next(it.line for it in kept if it.id == r["id"])})
    splits = assign_splits(it.group for it in kept)
    _usefulness_negatives(builder, answered, splits)
    no = no_retrieval_records(no_questions, {it.language.split("-")[0] for it in answered} | {
        _language(it.question) for it in answered}, len(answered))
    builder.out["retrieve"].extend(no)
    splits.update(assign_splits(r["group"] for r in no))
    return Derived(records=builder.out, splits=splits, skipped=skipped, questions=len(items))
