"""Chinese labelled records derived from CMRC 2018, one set per judgement, mirroring the English ones
(:mod:`optimize.records`) so compile and eval run in Chinese (``selfrag compile --language zh``,
``selfrag eval --dataset cmrc``).

- **held-out paragraphs** (:func:`held_out`): a third of the paragraphs (seeded hash) are left out of
  the QA corpus ``cmrc-qa``; their questions are **unanswerable** there, kept only when no remaining
  paragraph contains any of their gold answers (a question paired only with paragraphs that do not
  contain its answer). The other questions are answerable from their own paragraph.
- ``qa_zh``: answerable and unanswerable questions (about a third unanswerable).
- ``relevance_zh``: a question with its own paragraph (relevant) vs the lexically closest paragraph
  (character-bigram TF-IDF, a retriever's view of Chinese) of another article of the same split that
  contains none of its answers (irrelevant).
- ``support_zh``: the gold span on its paragraph (fully); a changed span — digits changed, else the
  answer of a question of the hard-negative paragraph that the passage neither contains nor shares
  half of its character bigrams with — on the same paragraph (no); the gold span on the hard-negative
  paragraph (no).
- ``usefulness_zh``: the gold span (4, a short answer as HaluEval's) vs another question's answer
  (off topic, for half the groups by hash) or an evasive reply written by the project (1).
- ``retrieve_zh``: the Chinese items of the ``retrieve`` task (hand-written and sampled CMRC questions).

Every record has ``id``, ``group`` (the paragraph, as ``qa_zh``: one paragraph's questions share a split)
and ``source``. Nothing is hard-coded from the dataset: every text comes from the file at build time.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np

from optimize.records import MAX_PASSAGE_CHARS, numbered_passages, truncate
from optimize.sources import Paragraph, read_cmrc, split_of, stable_hash

HELD_OUT_SHARE = 1 / 3
QA_CORPUS = "cmrc-qa"  # the CMRC paragraphs that are not held out: what eval --dataset cmrc answers from
ZH_TASKS = ("qa_zh", "retrieve_zh", "relevance_zh", "support_zh", "usefulness_zh")

# Generic evasive replies written by the project (usefulness label 1).
EVASIVE_ANSWERS_ZH = (
    "这个不好说，要看具体情况。",
    "这是个好问题，需要考虑的因素很多。",
    "每种情况都不一样，没有统一的答案。",
    "建议你去别的地方查一查。",
    "没有更多背景信息的话很难判断。",
    "关于这个问题，大家的看法不太一样。",
    "这个比较复杂，众说纷纭。",
    "我不太方便回答这个问题。",
)

_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KEEP = re.compile(r"[\w\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def held_out(doc_id: str) -> bool:
    """Whether a CMRC paragraph is left out of the QA corpus (its questions become unanswerable)."""
    return int(stable_hash(f"cmrc-held-out:{doc_id}")[:15], 16) / 16**15 < HELD_OUT_SHARE


def _norm(text: str) -> str:
    return "".join(_KEEP.findall(text.lower()))


def contains_answer(passage: str, answers: list[str]) -> bool:
    """Whether ``passage`` holds any of ``answers`` (letters, digits and CJK characters compared)."""
    p = _norm(passage)
    return any(_norm(a) and _norm(a) in p for a in answers)


def bigrams(text: str) -> list[str]:
    t = _norm(text)
    return [t[i:i + 2] for i in range(len(t) - 1)] or ([t] if t else [])


def lexical_similarity(queries: list[str], passages: list[str]) -> np.ndarray:
    """Cosine of character-bigram TF-IDF vectors (queries × passages), rounded to 4 decimals."""
    docs = [Counter(bigrams(p)) for p in passages]
    df = Counter(g for d in docs for g in d)
    idf = {g: math.log((1 + len(docs)) / (1 + n)) + 1 for g, n in df.items()}

    def vector(counts: Counter) -> dict[str, float]:
        v = {g: c * idf.get(g, 0.0) for g, c in counts.items() if g in idf}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {g: x / norm for g, x in v.items()}

    pv = [vector(d) for d in docs]
    out = np.zeros((len(queries), len(passages)))
    for i, q in enumerate(queries):
        qv = vector(Counter(bigrams(q)))
        for j, v in enumerate(pv):
            out[i, j] = sum(x * v.get(g, 0.0) for g, x in qv.items())
    return np.round(out, 4)


def _answers(qa: dict) -> list[str]:
    return list(dict.fromkeys(a["text"].strip() for a in qa.get("answers", []) if a.get("text", "").strip()))


def qa_zh_records(paragraphs: list[Paragraph]) -> list[dict]:
    """CMRC questions: answerable on kept paragraphs; unanswerable on held-out ones whose answers no kept
    paragraph contains (the others are left out)."""
    kept = [p.text for p in paragraphs if not held_out(p.doc_id)]
    out = []
    for p in paragraphs:
        for qa in p.qas:
            answers = _answers(qa)
            if not answers:
                continue
            answerable = not held_out(p.doc_id)
            if not answerable and any(contains_answer(t, answers) for t in kept):
                continue
            out.append({"id": f"cmrc:{qa['id']}", "group": p.doc_id, "source": "cmrc2018", "language": "zh",
                        "question": qa["question"].strip(), "answer": answers[0] if answerable else "",
                        "answers": answers if answerable else [], "answerable": answerable,
                        "gold_doc_ids": [p.doc_id] if answerable else [], "related_doc_ids": [p.doc_id]})
    return out


def changed_span(answer: str, passage: str, alternatives: list[str]) -> str | None:
    """A span the passage does not back in place of ``answer``: its digits changed (each +1 mod 10), else
    the first alternative neither found in the passage nor sharing half its character bigrams with it;
    None when there is none."""
    if re.search(r"\d", answer):
        changed = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), answer)
        if not contains_answer(passage, [changed]):
            return changed
    grams = set(bigrams(passage))
    for alt in alternatives:
        own = set(bigrams(alt))
        if alt != answer and not contains_answer(passage, [alt]) and len(own & grams) < 0.5 * max(1, len(own)):
            return alt
    return None


def judgement_zh_records(paragraphs: list[Paragraph]) -> dict[str, list[dict]]:
    """relevance_zh, support_zh and usefulness_zh records (they share the lexical hard negatives)."""
    items = [(p, qa, _answers(qa)) for p in paragraphs for qa in p.qas if _answers(qa)]
    sims = lexical_similarity([qa["question"] for _, qa, _ in items], [p.text for p in paragraphs])
    index = {p.doc_id: j for j, p in enumerate(paragraphs)}
    rel: list[dict] = []
    sup: list[dict] = []
    use: list[dict] = []
    for i, (p, qa, answers) in enumerate(items):
        passage = truncate(p.text, MAX_PASSAGE_CHARS)
        if not contains_answer(passage, answers):
            continue
        g, key = p.doc_id, qa["id"]
        neg = None
        for j in sorted(range(len(paragraphs)), key=lambda j: (-sims[i, j], j)):
            o = paragraphs[j]
            if (j != index[g] and o.title != p.title and split_of(o.doc_id) == split_of(g)
                    and not contains_answer(o.text, answers)):
                neg = o
                break
        common = {"group": g, "source": "cmrc2018", "question": qa["question"].strip()}
        rel.append({**common, "id": f"rel:{key}:pos", "passage": passage, "title": p.title, "relevance": "relevant"})
        sup.append({**common, "id": f"sup:{key}:fully", "passages": numbered_passages([passage]),
                    "answer": answers[0], "support": "fully"})
        use.append({**common, "id": f"use:{key}:gold", "answer": answers[0], "usefulness": 4, "kind": "gold"})
        others = [a for o_qa in (neg.qas if neg is not None else []) for a in _answers(o_qa)]
        if neg is not None:
            neg_passage = truncate(neg.text, MAX_PASSAGE_CHARS)
            rel.append({**common, "id": f"rel:{key}:neg", "passage": neg_passage, "title": neg.title,
                        "relevance": "irrelevant", "negative_of": neg.doc_id})
            sup.append({**common, "id": f"sup:{key}:no", "passages": numbered_passages([neg_passage]),
                        "answer": answers[0], "support": "no", "negative_of": neg.doc_id})
        changed = changed_span(answers[0], passage, others)
        if changed is not None:
            sup.append({**common, "id": f"sup:{key}:changed", "passages": numbered_passages([passage]),
                        "answer": changed, "support": "no", "kind": "changed_span"})
        if others and int(stable_hash(f"use-kind:{key}")[:8], 16) % 2 == 0:
            use.append({**common, "id": f"use:{key}:off_topic", "answer": others[0], "usefulness": 1,
                        "kind": "off_topic"})
        else:
            evasive = EVASIVE_ANSWERS_ZH[int(stable_hash(f"evasive:{key}")[:8], 16) % len(EVASIVE_ANSWERS_ZH)]
            use.append({**common, "id": f"use:{key}:evasive", "answer": evasive, "usefulness": 1, "kind": "evasive"})
    return {"relevance_zh": rel, "support_zh": sup, "usefulness_zh": use}


def is_chinese(text: str) -> bool:
    return len(_CJK.findall(text)) >= max(1, len(re.findall(r"[A-Za-z]", text)) // 3)


def zh_records(datasets_dir: Path, retrieve: list[dict], limit: int | None = None) -> dict[str, list[dict]]:
    """Every Chinese task's records; ``retrieve`` is the built ``retrieve`` task (its Chinese items are kept)."""
    paragraphs = read_cmrc(datasets_dir, limit)
    return {"qa_zh": qa_zh_records(paragraphs),
            "retrieve_zh": [r for r in retrieve if is_chinese(r["question"])],
            **judgement_zh_records(paragraphs)}


def qa_corpus(paragraphs: list[Paragraph]) -> list[tuple[str, dict]]:
    """The ``cmrc-qa`` knowledge-base documents: the paragraphs that are not held out."""
    return [(p.text.strip(), {"doc_id": p.doc_id, "title": p.title, "source": "cmrc2018"})
            for p in paragraphs if not held_out(p.doc_id)]
