"""Readers of the public datasets (ClapNQ, CMRC 2018, XQuAD, HaluEval; see the datasets' README) and
of the project's hand-written retrieve-decision file, plus the knowledge-base documents they give.

Every reader takes the datasets folder from its caller (the command line passes
``selfrag.paths.datasets_dir()``). Sampling and the train/dev assignment hash with one fixed seed, so
one source question lands in the same split of every task and a rebuild gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from optimize.errors import DataError

SEED = "selfrag-splits-v1"
RETRIEVE_FILE = "retrieve_decision.jsonl"  # the hand-written retrieve decisions, in the project's data folder
DEV_FRACTION = 0.25


# ---------------------------------------------------------------- stable hashing


def stable_hash(text: str) -> str:
    """Seeded sha256 of ``text`` (hex): the order of every sample and split decision."""
    return hashlib.sha256(f"{SEED}:{text}".encode("utf-8")).hexdigest()


def split_of(group: str) -> str:
    """'dev' for a fixed DEV_FRACTION of groups (by seeded sha256), else 'train'."""
    return "dev" if int(stable_hash(group)[:15], 16) / 16**15 < DEV_FRACTION else "train"


def stable_sample(items: list, key: Callable[[Any], str], limit: int | None) -> list:
    """All items in file order, or the first ``limit`` by seeded hash of their key (stable sample)."""
    if limit is None:
        return items
    chosen = set(sorted(range(len(items)), key=lambda i: stable_hash("sample:" + key(items[i])))[:limit])
    return [it for i, it in enumerate(items) if i in chosen]


def normalize_question(text: str) -> str:
    """Lower case, punctuation to spaces, single spaces: to compare questions across datasets."""
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


# ---------------------------------------------------------------- raw items


@dataclass
class ClapItem:
    key: str  # clapnq:<question id>
    question: str
    answer: str
    answerable: bool
    doc_id: str  # clapnq:<id of the first question (sorted) whose passage has this text>
    title: str
    text: str
    sentences: list[str]
    selected: list[str] = field(default_factory=list)


@dataclass
class Paragraph:
    doc_id: str
    title: str
    text: str
    qas: list[dict] = field(default_factory=list)


@dataclass
class HaluItem:
    key: str  # halueval:<line number>
    question: str
    knowledge: str
    right_answer: str
    hallucinated_answer: str


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------- readers


def read_clapnq(datasets_dir: Path, limit: int | None = None) -> list[ClapItem]:
    """ClapNQ answerable then unanswerable (``limit`` applies to each file)."""
    d = Path(datasets_dir) / "clapnq"
    raw: list[tuple[dict, bool]] = []
    for name, answerable in (("answerable.jsonl", True), ("unanswerable.jsonl", False)):
        rows = stable_sample(read_jsonl(d / name), lambda r: f"clapnq:{r['id']}", limit)
        raw.extend((r, answerable) for r in rows)

    def same_text(text: str) -> str:
        return " ".join(text.split())

    canonical: dict[str, str] = {}
    for r, _ in sorted(raw, key=lambda x: str(x[0]["id"])):
        canonical.setdefault(same_text(r["passages"][0]["text"]), f"clapnq:{r['id']}")
    items = []
    for r, answerable in raw:
        p = r["passages"][0]
        out = r.get("output") or [{}]
        answer = next((o.get("answer", "") for o in out if o.get("answer")), "") if answerable else ""
        selected = next((o.get("selected_sentences") or [] for o in out if o.get("answer")), [])
        items.append(
            ClapItem(
                key=f"clapnq:{r['id']}", question=r["input"].strip(), answer=answer.strip(),
                answerable=answerable and bool(answer.strip()), doc_id=canonical[same_text(p["text"])],
                title=p.get("title", ""), text=p["text"], sentences=list(p.get("sentences") or []),
                selected=list(selected),
            )
        )
    return items


def read_squad_paragraphs(path: Path, prefix: str, use_ids: bool) -> list[Paragraph]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    paras, n = [], 0
    for article in data:
        title = str(article.get("title", "")).replace("_", " ")
        for p in article["paragraphs"]:
            doc_id = f"{prefix}:{p['id']}" if use_ids and p.get("id") else f"{prefix}:{n}"
            paras.append(Paragraph(doc_id=doc_id, title=title, text=p["context"], qas=list(p.get("qas", []))))
            n += 1
    return paras


def read_cmrc(datasets_dir: Path, limit: int | None = None) -> list[Paragraph]:
    paras = read_squad_paragraphs(Path(datasets_dir) / "cmrc2018" / "trial.json", "cmrc", True)
    return stable_sample(paras, lambda p: p.doc_id, limit)


def read_xquad(datasets_dir: Path, limit: int | None = None) -> list[Paragraph]:
    paras = read_squad_paragraphs(Path(datasets_dir) / "xquad" / "en.json", "xquad", False)
    return stable_sample(paras, lambda p: p.doc_id, limit)


def read_halueval(datasets_dir: Path, limit: int | None = None) -> list[HaluItem]:
    rows = read_jsonl(Path(datasets_dir) / "halueval" / "qa.jsonl")
    items = [
        HaluItem(f"halueval:{i}", r["question"].strip(), r["knowledge"].strip(), r["right_answer"].strip(),
                 r["hallucinated_answer"].strip())
        for i, r in enumerate(rows)
    ]
    return stable_sample(items, lambda it: it.key, limit)


def read_retrieve_file(path: Path) -> list[dict]:
    """The hand-written retrieve decisions (``<data dir>/retrieve_decision.jsonl``)."""
    return read_jsonl(Path(path))


def all_dataset_questions(datasets_dir: Path) -> set[str]:
    """Normalised questions of every public dataset (to check hand-written sets against)."""
    qs = {normalize_question(c.question) for c in read_clapnq(datasets_dir)}
    qs |= {normalize_question(h.question) for h in read_halueval(datasets_dir)}
    for p in read_cmrc(datasets_dir) + read_xquad(datasets_dir):
        qs |= {normalize_question(qa["question"]) for qa in p.qas}
    return qs


# ---------------------------------------------------------------- knowledge-base documents


def corpus_documents(dataset: str, datasets_dir: Path, distractors: bool = True) -> list[tuple[str, dict]]:
    """Documents for the knowledge base as ``(text, {"doc_id", "title", "source"})``.

    ``clapnq``: every ClapNQ passage once (answerable and unanswerable; two questions sharing a passage
    share its doc id) plus, with ``distractors``, all XQuAD English paragraphs. ``cmrc``: the CMRC
    2018 paragraphs; ``cmrc-qa``: those that are not held out (:mod:`optimize.records_zh`), what
    ``qa_zh`` questions are answered from. Full passage text (the knowledge base chunks it)."""
    docs: list[tuple[str, dict]] = []
    if dataset in ("clapnq", "en", "qa_en"):
        seen: set[str] = set()
        for c in read_clapnq(datasets_dir):
            if c.doc_id not in seen:
                seen.add(c.doc_id)
                docs.append((c.text.strip(), {"doc_id": c.doc_id, "title": c.title, "source": "clapnq"}))
        if distractors:
            for p in read_xquad(datasets_dir):
                docs.append((p.text.strip(), {"doc_id": p.doc_id, "title": p.title, "source": "xquad"}))
    elif dataset in ("cmrc", "zh"):
        for p in read_cmrc(datasets_dir):
            docs.append((p.text.strip(), {"doc_id": p.doc_id, "title": p.title, "source": "cmrc2018"}))
    elif dataset in ("cmrc-qa", "qa_zh"):  # without the held-out paragraphs of qa_zh's unanswerable questions
        from optimize.records_zh import qa_corpus

        docs = qa_corpus(read_cmrc(datasets_dir))
    else:
        raise DataError(f"unknown corpus {dataset!r}: use 'clapnq', 'cmrc' or 'cmrc-qa'")
    return docs
