"""A toy "own data" set shared by the derive, compile --data and eval --collection tests: five Markdown
pages, a QA file about them, and a knowledge base of the pages with the hashing embedder."""

from __future__ import annotations

import json
from pathlib import Path

PAGES = {
    "bridge.md": "# Zephyr bridge\n\nThe Zephyr bridge over the Oda river opened in 1931. It was designed by "
                 "Marta Kovac and is 420 metres long. The bridge carries two tram lines and a cycle path.\n",
    "acme.md": "# Acme company\n\nAcme was founded by Jane Roe in Leeds in 1902. The company first made tin toys. "
               "Today Acme builds garden tools and employs 3,400 people.\n",
    "trout.md": "# Oda trout\n\nThe Oda trout is a silver blue fish found in the upper Oda river. It spawns in "
                "October. Anglers need a permit from the river trust to catch it.\n",
    "tunnel.md": "# Zephyr tunnel\n\nThe Zephyr tunnel under the Oda river was dug in 1964 by the city council. "
                 "Trams use the bridge, while cars use the tunnel built beside the old ferry landing.\n",
    "market.md": "# Leeds market\n\nThe covered market of Leeds opens at seven on weekdays. Its fish hall was "
                 "rebuilt in 1976 after a fire destroyed the old roof.\n",
}

QA = [
    {"id": "b1", "question": "When did the Zephyr bridge open?", "answers": ["1931"], "gold_sources": ["bridge.md"]},
    {"id": "a1", "question": "Who founded Acme?", "answers": ["Jane Roe founded Acme in Leeds."],
     "gold_sources": ["docs/acme.md"]},
    {"id": "t1", "question": "What colour is the Oda trout?", "answers": ["silver blue"]},
    {"id": "u1", "question": "Who won the Zephyr race?", "answers": []},
    {"id": "t2", "question": "When does the Oda trout spawn?", "answers": ["It spawns in October."],
     "gold_sources": ["trout.md"]},
    {"id": "m1", "question": "When was the fish hall of the Leeds market rebuilt?", "answers": ["in 1976"],
     "gold_sources": ["market.md"]},
    {"id": "k1", "question": "Who designed the Zephyr bridge?", "answers": ["Marta Kovac"],
     "gold_sources": ["bridge.md"]},
]


def write_pages(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in PAGES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def write_qa(path: Path, rows=QA) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def hash_kb(tmp_path: Path, collection: str = "toy"):
    """The pages ingested into ``collection`` under ``tmp_path/kb`` with the hashing embedder."""
    from selfrag.kb.embedder import HashEmbedder
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.settings import KBSettings, RetrievalSettings

    kb = build_knowledge_base(KBSettings(path=tmp_path / "kb", collection=collection), RetrievalSettings(),
                              embedder=HashEmbedder(256))
    if kb.is_empty():
        kb.ingest([write_pages(tmp_path / "docs")], progress=False)
    return kb


def catalog(kb):
    from optimize.qa_format import Catalog

    return Catalog.from_chunks((cid, meta) for cid, _, meta in kb.store.iter_all(include_sources_only=True))
