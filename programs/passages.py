"""How passages reach a prompt and come back as citations: quoting, numbering, references.

Retrieved and web text is data, never instructions: it is shown numbered and quoted between « and »,
with anything that could close the quote or forge a DSPy field header neutralised
(:func:`quote_safe`). Every program formats its evidence here, so there is one quoting rule.
"""

from __future__ import annotations

from collections.abc import Iterable

from programs.types import Citation, Passage

ABSTAIN_ANSWER = "I could not find this in the available sources."

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


def format_passages(passages: list[Passage], max_chars: int) -> str:
    """Numbered, delimited passages, one per line: ``[1] (title) «text»``."""
    return "\n".join(f"[{i}] {quote(p.text, p.title, max_chars)}" for i, p in enumerate(passages, start=1))


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
