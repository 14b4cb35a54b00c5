"""Write the README's worked example of "your own data": a folder of Markdown pages and a QA file, made
from the bundled ClapNQ data (or, with ``--language zh``, CMRC 2018) as if a user had written them.

    python scripts/example_user_data.py --out /tmp/clapnq-user [--datasets DIR] [--limit N] [--language zh]

``OUT/docs/<title>.md``: one page per ClapNQ title (``# Title`` then each distinct passage of that title
as a paragraph). ``OUT/qa.jsonl``: one line per ClapNQ question (answerable and unanswerable), in the
documented QA format: ``id``, ``question``, ``answers`` (``[]`` when unanswerable) and, for answerable
ones, ``gold_sources`` (the page's file name). ``--limit`` takes that many questions of each kind
(a stable hash sample), and only their pages. Nothing is downloaded; the datasets folder is
``$SELFRAG_DATASETS`` or ``../shared/datasets`` beside the checkout.

``--language zh``: one page per CMRC title holding its paragraphs that ``eval --dataset cmrc`` answers
from; its unanswerable questions are those of the held-out paragraphs (:mod:`optimize.records_zh`), whose
text is on no page, so ``answers`` is ``[]`` for them; every line carries ``"language": "zh"``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from optimize.records_zh import held_out, qa_zh_records
from optimize.sources import read_clapnq, read_cmrc, stable_hash, stable_sample
from selfrag.paths import datasets_dir

# the dataset each language's example is made from: its folder and its name
LANGUAGES = {"en": ("clapnq", "ClapNQ"), "zh": ("cmrc2018", "CMRC 2018")}


def page_name(title: str) -> str:
    """A file name for a title: lower case words (Latin letters and digits, or Chinese characters) joined
    by '-', at most 60 characters, plus a short hash of the title (two titles never share a file)."""
    slug = "-".join(re.findall(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff]+", title.lower()))[:60].strip("-") or "page"
    return f"{slug}-{stable_hash('page:' + title)[:6]}.md"


def _title(title: str) -> str:
    return title.strip() or "Untitled"


def _write(out: Path, pages: dict[str, list[str]], records: list[dict]) -> dict[str, int]:
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for title, texts in sorted(pages.items()):
        (docs / page_name(title)).write_text(f"# {title}\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")
    with open(out / "qa.jsonl", "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return {"pages": len(pages), "questions": len(records), "answerable": sum(bool(r["answers"]) for r in records)}


def _add(pages: dict[str, list[str]], title: str, text: str) -> None:
    texts = pages.setdefault(_title(title), [])
    if text not in texts:
        texts.append(text)


def build(datasets: Path, out: Path, limit: int | None = None) -> dict[str, int]:
    """Write ``out/docs/*.md`` and ``out/qa.jsonl`` from ClapNQ; returns counts."""
    items = read_clapnq(datasets, limit)
    pages: dict[str, list[str]] = {}
    records = []
    for it in items:
        _add(pages, it.title, " ".join(it.text.split()))
        record = {"id": it.key, "question": it.question, "answers": [it.answer] if it.answerable else []}
        if it.answerable:
            record["gold_sources"] = [page_name(_title(it.title))]
        records.append(record)
    return _write(out, pages, records)


def build_zh(datasets: Path, out: Path, limit: int | None = None) -> dict[str, int]:
    """Write ``out/docs/*.md`` and ``out/qa.jsonl`` from CMRC 2018 (``limit`` questions of each kind, and
    the pages of the answerable ones); returns counts."""
    paragraphs = read_cmrc(datasets)
    rows = [r for r in qa_zh_records(paragraphs) if r["question"]]  # CMRC has a few blank questions
    rows = [r for kind in (True, False)
            for r in stable_sample([r for r in rows if r["answerable"] is kind], lambda r: r["id"], limit)]
    title_of = {p.doc_id: p.title for p in paragraphs}
    wanted = {r["group"] for r in rows if r["answerable"]} if limit is not None else None
    pages: dict[str, list[str]] = {}
    for p in paragraphs:
        if not held_out(p.doc_id) and (wanted is None or p.doc_id in wanted):
            _add(pages, p.title, p.text.strip())
    records = []
    for r in rows:
        record = {"id": r["id"], "question": r["question"], "answers": r["answers"], "language": "zh"}
        if r["answerable"]:
            record["gold_sources"] = [page_name(_title(title_of[r["group"]]))]
        records.append(record)
    return _write(out, pages, records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write docs/ and qa.jsonl into")
    parser.add_argument("--datasets", type=Path, default=None, help="the public datasets folder")
    parser.add_argument("--limit", type=int, default=None, help="questions of each kind (answerable, not)")
    parser.add_argument("--language", choices=sorted(LANGUAGES), default="en",
                        help="en: ClapNQ (default); zh: CMRC 2018")
    args = parser.parse_args(argv)
    datasets = args.datasets or datasets_dir()
    folder, name = LANGUAGES[args.language]
    if not (datasets / folder).is_dir():
        print(f"error: no {name} data under {datasets} (pass --datasets or set SELFRAG_DATASETS)", file=sys.stderr)
        return 2
    counts = (build if args.language == "en" else build_zh)(datasets, args.out, args.limit)
    print(f"wrote {counts['pages']} pages to {args.out / 'docs'} and {counts['questions']} questions "
          f"({counts['answerable']} answerable) to {args.out / 'qa.jsonl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
