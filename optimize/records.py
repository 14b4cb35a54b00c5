"""Labelled records (plain dicts) per task, built from the public datasets: QA questions, retrieve
decisions, and relevance / support / usefulness judgements with mined hard negatives.

Fields per task (inputs marked *):

- ``qa_en`` (ClapNQ answerable + unanswerable), ``qa_zh`` (CMRC 2018, :mod:`optimize.records_zh`): ``question``*, ``answer``
  (first gold answer, ``""`` if unanswerable), ``answers`` (all gold answers), ``gold_doc_ids``
  (``[]`` if unanswerable), ``related_doc_ids`` (the dataset passage of the question, also for
  unanswerable ones), ``answerable``, ``language``, ``source``, ``id``.
- ``retrieve``: ``question``*, ``answer_so_far``* (always ``""``), ``decision`` (``yes``/``no``).
- ``relevance``: ``question``*, ``passage``*, ``relevance`` (``relevant``/``irrelevant``), ``title``.
- ``support``: ``question``*, ``passages``* (``"[1] ..."``), ``answer``*, ``support`` (``fully``/``no``).
- ``usefulness``: ``question``*, ``answer``*, ``usefulness`` (1, 4 or 5), ``kind``
  (``gold``/``off_topic``/``evasive``).

Every record also has ``id``, ``group`` (the source question it derives from) and ``source``.
The Chinese sets (``qa_zh``, ``retrieve_zh``, ``relevance_zh``, ``support_zh``, ``usefulness_zh``) are
built by :mod:`optimize.records_zh`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from optimize import negatives
from optimize.errors import DataError
from optimize.sources import (
    normalize_question,
    read_clapnq,
    read_cmrc,
    read_halueval,
    read_retrieve_file,
    split_of,
    stable_hash,
)

MAX_PASSAGE_CHARS = 1500
RETRIEVE_SAMPLED_PER_DATASET = 8  # ClapNQ and CMRC questions added as "yes" retrieve examples
MAX_ANSWER_OVERLAP = 0.5  # a negative passage may hold at most this share of the answer's content words

# Generic evasive answers written by the project (usefulness label 1).
EVASIVE_ANSWERS = (
    "I'm not sure, it depends.",
    "That's a good question. There are many factors to consider.",
    "It varies from case to case, so there is no single answer.",
    "You might want to look that up somewhere else.",
    "Hard to tell without more context.",
    "There are different opinions on this topic.",
    "Well, it's complicated and people disagree about it.",
    "I would rather not say.",
)

_STOP = frozenset(
    "a an and are as at be been but by for from had has have he her his in is it its of on or she that the "
    "their them they this to was were which who with also after before into not one two".split()
)


# ---------------------------------------------------------------- passages


def truncate(text: str, max_chars: int = MAX_PASSAGE_CHARS) -> str:
    """Cut at the last sentence end (or space) before ``max_chars``."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    for sep in (". ", "。", "! ", "? ", " "):
        i = cut.rfind(sep)
        if i > max_chars // 2:
            return cut[: i + len(sep)].strip()
    return cut


def window_passage(sentences: list[str], selected: list[str], max_chars: int = MAX_PASSAGE_CHARS) -> str:
    """A contiguous run of sentences containing every selected (answer) sentence, widened with
    neighbours while it fits in ``max_chars``. If the selected sentences alone span more than that,
    the selected sentences joined with " ... " (an elision, nothing added)."""
    idx = sorted({sentences.index(s) for s in selected if s in sentences})
    if not sentences:
        return ""
    if not idx:
        return truncate(" ".join(sentences), max_chars)
    lo, hi = idx[0], idx[-1]

    def length(a: int, b: int) -> int:
        return sum(len(s) + 1 for s in sentences[a : b + 1])

    if length(lo, hi) > max_chars:
        return " ... ".join(sentences[i] for i in idx)
    grown = True
    while grown:
        grown = False
        if hi + 1 < len(sentences) and length(lo, hi + 1) <= max_chars:
            hi, grown = hi + 1, True
        if lo > 0 and length(lo - 1, hi) <= max_chars:
            lo, grown = lo - 1, True
    return " ".join(s.strip() for s in sentences[lo : hi + 1])


def numbered_passages(texts: Sequence[str]) -> str:
    """Numbered passages as the signatures expect: ``[1] text``, blank line between."""
    return "\n\n".join(f"[{i}] {t}" for i, t in enumerate(texts, 1))


def content_words(text: str) -> set[str]:
    """The content words of ``text``: lower case, no stop words, longer than 2 letters, and every
    word with a digit whatever its length (in "16 weeks" the 16 is what matters)."""
    return {w for w in normalize_question(text).split()
            if w not in _STOP and (len(w) > 2 or any(ch.isdigit() for ch in w))}


def answer_overlap(answer: str, passage: str) -> float:
    """Share of the answer's content words (:func:`content_words`) found in passage."""
    words = content_words(answer)
    if not words:
        return 0.0
    return len(words & set(normalize_question(passage).split())) / len(words)


def contains_text(haystack: str, needle: str) -> bool:
    n = normalize_question(needle)
    return bool(n) and n in normalize_question(haystack)


# ---------------------------------------------------------------- QA and retrieve records


def qa_records(dataset: str, datasets_dir: Path, limit: int | None = None) -> list[dict]:
    if dataset in ("clapnq", "qa_en"):
        return [
            {"id": c.key, "group": c.key, "source": "clapnq", "language": "en", "question": c.question,
             "answer": c.answer, "answers": [c.answer] if c.answer else [], "answerable": c.answerable,
             "gold_doc_ids": [c.doc_id] if c.answerable else [], "related_doc_ids": [c.doc_id]}
            for c in read_clapnq(datasets_dir, limit)
        ]
    if dataset in ("cmrc", "qa_zh"):
        out = []
        for p in read_cmrc(datasets_dir, limit):
            for qa in p.qas:
                spans = (a["text"].strip() for a in qa.get("answers", []))
                answers = list(dict.fromkeys(a for a in spans if a))
                out.append(
                    {"id": f"cmrc:{qa['id']}", "group": p.doc_id, "source": "cmrc2018", "language": "zh",
                     "question": qa["question"].strip(), "answer": answers[0] if answers else "",
                     "answers": answers, "answerable": bool(answers),
                     "gold_doc_ids": [p.doc_id] if answers else [], "related_doc_ids": [p.doc_id]}
                )
        return out
    raise DataError(f"unknown QA dataset {dataset!r}")


def retrieve_records(datasets_dir: Path, retrieve_file: Path, limit: int | None = None,
                     sampled: int = RETRIEVE_SAMPLED_PER_DATASET) -> list[dict]:
    """The hand-written file plus ``sampled`` ClapNQ and CMRC questions (stable hash sample) as "yes"."""
    out = [
        {"id": r["id"], "group": f"rd:{r['id']}", "source": "selfrag-handwritten", "question": r["question"],
         "answer_so_far": r.get("answer_so_far", ""), "decision": r["decision"]}
        for r in read_retrieve_file(retrieve_file)
    ]
    for qa in (qa_records("clapnq", datasets_dir, limit), qa_records("cmrc", datasets_dir, limit)):
        for r in sorted(qa, key=lambda r: stable_hash(r["id"]))[:sampled]:
            out.append({"id": f"rd:{r['id']}", "group": r["group"], "source": r["source"],
                        "question": r["question"], "answer_so_far": "", "decision": "yes"})
    return out


# ---------------------------------------------------------------- judgement records


def _off_topic(i: int, items: list, qq, key: Callable[[Any], str]) -> int | None:
    """Another question of the same split, among the least similar half, picked by hash."""
    same = [j for j in range(len(items)) if j != i and split_of(key(items[j])) == split_of(key(items[i]))]
    if not same:
        return None
    same.sort(key=lambda j: (qq[i, j], j))
    far = same[: max(1, len(same) // 2)]
    return sorted(far, key=lambda j: stable_hash(f"{key(items[i])}>{key(items[j])}"))[0]


def evasive_answer(group: str) -> str:
    return EVASIVE_ANSWERS[int(stable_hash(f"evasive:{group}")[:8], 16) % len(EVASIVE_ANSWERS)]


def _usefulness_negative(common: dict, g: str, i: int, items: list, qq, answer_of: Callable[[Any], str]) -> dict:
    """An off-topic answer (another question's, for half the groups by hash) or an evasive one."""
    if int(stable_hash(f"use-kind:{g}")[:8], 16) % 2 == 0:
        j = _off_topic(i, items, qq, lambda x: x.key)
        if j is not None:
            return {**common, "id": f"use:{g}:off_topic", "answer": answer_of(items[j]), "usefulness": 1,
                    "kind": "off_topic"}
    return {**common, "id": f"use:{g}:evasive", "answer": evasive_answer(g), "usefulness": 1, "kind": "evasive"}


def judgement_records(datasets_dir: Path, limit: int | None = None,
                      embed_fn: Callable | None = None) -> dict[str, list[dict]]:
    """Relevance, support and usefulness records (they share the hard-negative mining)."""
    embed = embed_fn or negatives.minilm_embed
    clap = [c for c in read_clapnq(datasets_dir, limit) if c.answerable]
    clap_pool = read_clapnq(datasets_dir, limit)  # negatives may come from any ClapNQ passage
    halu = read_halueval(datasets_dir, limit)

    clap_q = embed([c.question for c in clap])
    clap_p = embed([c.text for c in clap_pool])
    halu_q = embed([h.question for h in halu])
    halu_k = embed([h.knowledge for h in halu])
    s_clap = negatives.similarity(clap_q, clap_p)
    s_halu = negatives.similarity(halu_q, halu_k)
    qq_clap = negatives.similarity(clap_q, clap_q)
    qq_halu = negatives.similarity(halu_q, halu_q)
    pool_index = {c.key: j for j, c in enumerate(clap_pool)}
    halu_index = {h.key: j for j, h in enumerate(halu)}

    rel: list[dict] = []
    sup: list[dict] = []
    use: list[dict] = []

    # ---- ClapNQ answerable (a passage shared by two questions has one doc_id)
    for i, c in enumerate(clap):
        g = c.key
        gold_passage = window_passage(c.sentences, c.selected) if c.sentences else truncate(c.text)
        gold_score = s_clap[i, pool_index[c.key]]

        def allowed(j: int, c=c) -> bool:
            o = clap_pool[j]
            return (o.doc_id != c.doc_id and o.title.strip().lower() != c.title.strip().lower()
                    and split_of(o.key) == split_of(c.key)
                    and answer_overlap(c.answer, o.text) < MAX_ANSWER_OVERLAP)

        neg = negatives.hardest(s_clap[i], allowed, below=gold_score)
        common = {"group": g, "source": "clapnq", "question": c.question}
        rel.append({**common, "id": f"rel:{g}:pos", "passage": gold_passage, "title": c.title,
                    "relevance": "relevant"})
        sup.append({**common, "id": f"sup:{g}:fully", "passages": numbered_passages([gold_passage]),
                    "answer": c.answer, "support": "fully"})
        if neg is not None:
            o = clap_pool[neg]
            neg_passage = truncate(o.text)
            rel.append({**common, "id": f"rel:{g}:neg", "passage": neg_passage, "title": o.title,
                        "relevance": "irrelevant", "negative_of": o.doc_id})
            sup.append({**common, "id": f"sup:{g}:no", "passages": numbered_passages([neg_passage]),
                        "answer": c.answer, "support": "no", "negative_of": o.doc_id})
        use.append({**common, "id": f"use:{g}:gold", "answer": c.answer, "usefulness": 5, "kind": "gold"})
        use.append(_usefulness_negative(common, g, i, clap, qq_clap, lambda x: x.answer))

    # ---- HaluEval
    for i, h in enumerate(halu):
        g = h.key
        gold_score = s_halu[i, halu_index[h.key]]

        def allowed_h(j: int, h=h) -> bool:
            o = halu[j]
            return (" ".join(o.knowledge.split()) != " ".join(h.knowledge.split())
                    and not contains_text(o.knowledge, h.right_answer)
                    and split_of(o.key) == split_of(h.key))

        neg = negatives.hardest(s_halu[i], allowed_h, below=gold_score)
        knowledge = truncate(h.knowledge)
        common = {"group": g, "source": "halueval", "question": h.question}
        rel.append({**common, "id": f"rel:{g}:pos", "passage": knowledge, "title": "",
                    "relevance": "relevant"})
        if neg is not None:
            rel.append({**common, "id": f"rel:{g}:neg", "passage": truncate(halu[neg].knowledge), "title": "",
                        "relevance": "irrelevant", "negative_of": halu[neg].key})
        sup.append({**common, "id": f"sup:{g}:fully", "passages": numbered_passages([knowledge]),
                    "answer": h.right_answer, "support": "fully"})
        sup.append({**common, "id": f"sup:{g}:no", "passages": numbered_passages([knowledge]),
                    "answer": h.hallucinated_answer, "support": "no"})
        use.append({**common, "id": f"use:{g}:gold", "answer": h.right_answer, "usefulness": 4,
                    "kind": "gold"})
        use.append(_usefulness_negative(common, g, i, halu, qq_halu, lambda x: x.right_answer))

    return {"relevance": rel, "support": sup, "usefulness": use}


def all_records(datasets_dir: Path, retrieve_file: Path, limit: int | None = None,
                embed_fn: Callable | None = None, tasks: Sequence[str] | None = None) -> dict[str, list[dict]]:
    """The records of every task, or of ``tasks`` only (the English judgement sets, which need the
    MiniLM embedder, are built only when one of them is asked for)."""
    from optimize.records_zh import zh_records

    wanted = set(tasks) if tasks is not None else None
    records = {"retrieve": retrieve_records(datasets_dir, retrieve_file, limit)}
    if wanted is None or "qa_en" in wanted:
        records["qa_en"] = qa_records("clapnq", datasets_dir, limit)
    if wanted is None or wanted & {"relevance", "support", "usefulness"}:
        records.update(judgement_records(datasets_dir, limit, embed_fn))
    records.update(zh_records(datasets_dir, records["retrieve"], limit))  # qa_zh and the *_zh judgements
    return {task: recs for task, recs in records.items() if wanted is None or task in wanted}
