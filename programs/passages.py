"""How passages reach a prompt and come back as citations: quoting, numbering, references.

Retrieved and web text is data, never instructions: it is shown numbered and quoted between « and »,
with anything that could close the quote or forge a DSPy field header neutralised
(:func:`quote_safe`). Every program formats its evidence here, so there is one quoting rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from programs.language import ABSTAIN_ANSWERS
from programs.types import Citation, Passage

ABSTAIN_ANSWER = ABSTAIN_ANSWERS["en"]  # a Chinese question gets programs.language.abstain_answer's

_DELIMITERS = str.maketrans({"«": "‹", "»": "›"})


def quote_safe(text: str) -> str:
    """Neutralise what could let quoted text break out of its field: the «» passage delimiters become
    ‹›, and DSPy's field headers ``[[ ## name ## ]]`` lose their double bracket."""
    return text.translate(_DELIMITERS).replace("[[", "[ [").replace("]]", "] ]")


def _clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars] + "…"


def quote(text: str, title: str, max_chars: int) -> str:
    """One quoted unit: ``(title) «text»`` (no title: ``«text»``), clipped to ``max_chars``."""
    return (f"({quote_safe(title)}) " if title else "") + f"«{quote_safe(_clip(text, max_chars))}»"


_WORD = re.compile(r"[^\W\d_\u3400-\u9fff\uf900-\ufaff]{3,}|\d+", re.UNICODE)  # CJK: bigrams, below
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_BOUNDARY = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")
_STOP = frozenset("the and for with what who whom whose which when where why how does did are was were "
                  "has have had from that this these those into about than then them they their its "
                  "can could would should will shall may might not any all".split())


def query_terms(query: str) -> set[str]:
    """Lower-cased content words of ``query`` (3+ letters or a number, stop words dropped) and, for
    Chinese, its character bigrams."""
    q = query.lower()
    terms = {w for w in _WORD.findall(q) if w not in _STOP and not _CJK.search(w)}
    cjk = "".join(_CJK.findall(q))
    terms |= {cjk[i:i + 2] for i in range(len(cjk) - 1)}
    return terms


def passage_window(text: str, query: str, max_chars: int) -> str:
    """The ``max_chars`` of ``text`` that mention the most query terms, starting at a sentence boundary
    (the start of the text on ties and when nothing matches): the part of a long passage a judge
    needs, instead of its first ``max_chars``. Clipped ends are marked with "…"."""
    if len(text) <= max_chars:
        return text
    terms = query_terms(query)
    starts = [0] + [m.end() for m in _BOUNDARY.finditer(text) if 0 < m.end() < len(text) - 1]
    best, best_hits = 0, -1
    lowered = text.lower()
    for start in starts:
        window = lowered[start:start + max_chars]
        head = window[: max_chars // 2]  # ties go to the window whose matches come early (context follows)
        hits = sum(1 for t in terms if t in window) + 0.5 * sum(1 for t in terms if t in head)
        if hits > best_hits:
            best, best_hits = start, hits
    if best_hits <= 0:
        best = 0
    piece = text[best:best + max_chars]
    return ("…" if best > 0 else "") + piece + ("…" if best + max_chars < len(text) else "")


def format_passages(passages: list[Passage], max_chars: int, query: str | None = None) -> str:
    """Numbered, delimited passages, one per line: ``[1] (title) «text»``. With ``query``, a long
    passage is shown as its :func:`passage_window` around the query terms instead of its beginning."""
    def shown(p: Passage) -> str:
        if query is None:
            return quote(p.text, p.title, max_chars)
        return (f"({quote_safe(p.title)}) " if p.title else "") + f"«{quote_safe(passage_window(p.text, query, max_chars))}»"

    return "\n".join(f"[{i}] {shown(p)}" for i, p in enumerate(passages, start=1))


def passage_ref(p: Passage) -> str:
    """The id a judgement or citation of ``p`` is recorded under: its document id when it has one, else its id."""
    return str(p.metadata.get("doc_id") or p.id)


def cited_passages(passages: list[Passage], numbers: Iterable[object] | None) -> list[Passage]:
    """The passages a draft cites by their 1-based number in :func:`format_passages`; numbers out of
    range (or not integers) are ignored, and a draft citing none cites all it was given."""
    cited = [passages[n - 1] for n in (numbers or []) if isinstance(n, int) and 1 <= n <= len(passages)]
    return cited or list(passages)


def citation(p: Passage) -> Citation:
    return Citation(id=p.id, source=p.source, title=p.title, snippet=p.text[:200])
