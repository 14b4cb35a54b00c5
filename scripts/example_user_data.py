"""Write the README's worked example of "your own data": a folder of Markdown pages and a QA file, made
from the bundled ClapNQ data as if a user had written them.

    python scripts/example_user_data.py --out /tmp/clapnq-user [--datasets DIR] [--limit N]

``OUT/docs/<title>.md``: one page per ClapNQ title (``# Title`` then each distinct passage of that title
as a paragraph). ``OUT/qa.jsonl``: one line per ClapNQ question (answerable and unanswerable), in the
documented QA format: ``id``, ``question``, ``answers`` (``[]`` when unanswerable) and, for answerable
ones, ``gold_sources`` (the page's file name). ``--limit`` takes that many questions of each kind
(a stable hash sample), and only their pages. Nothing is downloaded; the datasets folder is
``$SELFRAG_DATASETS`` or ``../shared/datasets`` beside the checkout.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from optimize.sources import read_clapnq, stable_hash
from selfrag.paths import datasets_dir


def page_name(title: str) -> str:
    """A file name for a title: lower case words joined by '-', at most 60 characters, plus a short
    hash of the title (two titles never share a file)."""
    slug = "-".join(re.findall(r"[a-z0-9]+", title.lower()))[:60].strip("-") or "page"
    return f"{slug}-{stable_hash('page:' + title)[:6]}.md"


def build(datasets: Path, out: Path, limit: int | None = None) -> dict[str, int]:
    """Write ``out/docs/*.md`` and ``out/qa.jsonl``; returns counts."""
    items = read_clapnq(datasets, limit)
    pages: dict[str, list[str]] = {}
    for it in items:
        texts = pages.setdefault(it.title.strip() or "Untitled", [])
        text = " ".join(it.text.split())
        if text not in texts:
            texts.append(text)
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for title, texts in sorted(pages.items()):
        (docs / page_name(title)).write_text(f"# {title}\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")
    with open(out / "qa.jsonl", "w", encoding="utf-8") as fh:
        for it in items:
            record = {"id": it.key, "question": it.question, "answers": [it.answer] if it.answerable else []}
            if it.answerable:
                record["gold_sources"] = [page_name(it.title.strip() or "Untitled")]
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return {"pages": len(pages), "questions": len(items), "answerable": sum(it.answerable for it in items)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write docs/ and qa.jsonl into")
    parser.add_argument("--datasets", type=Path, default=None, help="the public datasets folder")
    parser.add_argument("--limit", type=int, default=None, help="questions of each kind (answerable, not)")
    args = parser.parse_args(argv)
    datasets = args.datasets or datasets_dir()
    if not (datasets / "clapnq").is_dir():
        print(f"error: no ClapNQ data under {datasets} (pass --datasets or set SELFRAG_DATASETS)", file=sys.stderr)
        return 2
    counts = build(datasets, args.out, args.limit)
    print(f"wrote {counts['pages']} pages to {args.out / 'docs'} and {counts['questions']} questions "
          f"({counts['answerable']} answerable) to {args.out / 'qa.jsonl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
