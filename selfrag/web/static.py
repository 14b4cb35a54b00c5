"""A tiny in-memory "web" for tests and demos: a fixed list of passages ranked by token overlap."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from programs.types import Passage, WebSearchError

logger = logging.getLogger(__name__)

# CJK characters count one token each; other scripts split on non-word characters.
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have how in is it its of on or that the this "
    "to was were what when where which who whom whose why with".split()
)


def tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS}


class StaticWebSearch:
    """:class:`~programs.types.WebSearch` over fixed passages; score = shared tokens / query tokens.

    Passages without a URL get ``static://<id>``; every result carries ``origin = "web"``. Passages
    sharing no token with the query are not returned; no result at all raises ``WebSearchError("empty")``.
    """

    def __init__(self, passages: Iterable[Passage], max_results: int = 3):
        self.passages = [self._as_web(p) for p in passages]
        self.max_results = max_results
        self.calls: list[str] = []  # queries seen, for tests
        self._tokens = [tokens(p.title + " " + p.text) for p in self.passages]

    @staticmethod
    def _as_web(p: Passage) -> Passage:
        meta = dict(p.metadata)
        url = str(meta.get("url") or f"static://{p.id}")
        meta.update(url=url, title=str(meta.get("title") or url), source=url, origin="web")
        return Passage(id=p.id, text=p.text, score=p.score, metadata=meta)

    def search(self, query: str, max_results: int | None = None) -> list[Passage]:
        n = self.max_results if max_results is None else min(max_results, self.max_results)  # web.max_results caps
        if n < 1:
            raise ValueError(f"max_results must be >= 1, got {n}")
        self.calls.append(query)
        q = tokens(query)
        if not q:
            raise WebSearchError("bad_request", f"the query {query!r} has no searchable word")
        scored = [(len(q & toks) / len(q), i) for i, toks in enumerate(self._tokens)]
        ranked = sorted(((s, i) for s, i in scored if s > 0), key=lambda si: (-si[0], si[1]))  # ties: given order
        if not ranked:
            raise WebSearchError("empty", f"no static web passage matches {query!r}")
        out = [self.passages[i].model_copy(update={"score": s}) for s, i in ranked[:n]]
        logger.debug("static web: %d result(s) for %r", len(out), query)
        return out
