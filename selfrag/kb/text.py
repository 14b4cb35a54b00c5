"""Text helpers shared by chunking, BM25 and the hashing embedder: CJK-aware tokenisation,
language guessing and content hashing."""

from __future__ import annotations

import functools
import hashlib
import logging
import re

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff"
_HANGUL = "\uac00-\ud7af"
# A run of CJK ideographs, a run of kana, a run of hangul, or a word of letters/digits.
_RUN_RE = re.compile(rf"([{_CJK}]+)|([{_KANA}]+)|([{_HANGUL}]+)|([^\W_]+)", re.UNICODE)
_CJK_CHAR_RE = re.compile(rf"[{_CJK}]")
_KANA_RE = re.compile(rf"[{_KANA}]")
_HANGUL_RE = re.compile(rf"[{_HANGUL}]")
_LATIN_RE = re.compile(r"[A-Za-z\u00c0-\u024f]")

# A small English stop list; BM25 works without it, but it sharpens short questions.
STOPWORDS = frozenset(
    "a an and are as at be by for from has have he her his i in is it its of on or she that the their "
    "them they this to was were what when where which who whom why will with how do does did".split()
)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


@functools.lru_cache(maxsize=1)
def _stemmer():
    try:
        import Stemmer

        return Stemmer.Stemmer("english")
    except Exception:  # pragma: no cover - PyStemmer is a declared dependency
        return None


def bm25_tokens(text: str, stem: bool = True) -> list[str]:
    """Tokens for BM25: jieba words for Chinese runs, characters for kana/hangul runs, lowercased
    (stemmed, stop-listed) words otherwise. No whitespace assumptions for CJK text."""
    out: list[str] = []
    stemmer = _stemmer() if stem else None
    for cjk, kana, hangul, word in _RUN_RE.findall(text):
        if cjk:
            out.extend(t for t in _jieba().lcut_for_search(cjk) if t.strip())
        elif kana or hangul:
            run = kana or hangul
            out.extend(run[i:i + 2] for i in range(max(1, len(run) - 1)))
        else:
            w = word.lower()
            if w in STOPWORDS:
                continue
            out.append(stemmer.stemWord(w) if stemmer is not None else w)
    return out


def hash_tokens(text: str) -> list[str]:
    """Cheap tokens for the hashing embedder: lowercased words, CJK characters and bigrams."""
    out: list[str] = []
    for cjk, kana, hangul, word in _RUN_RE.findall(text):
        run = cjk or kana or hangul
        if run:
            out.extend(run)
            out.extend(run[i:i + 2] for i in range(len(run) - 1))
        else:
            out.append(word.lower())
    return out


def detect_language(text: str) -> str:
    """Heuristic script-based guess: "zh", "ja", "ko", "en" (Latin script) or "und"."""
    sample = text[:4000]
    cjk = len(_CJK_CHAR_RE.findall(sample))
    kana = len(_KANA_RE.findall(sample))
    hangul = len(_HANGUL_RE.findall(sample))
    latin = len(_LATIN_RE.findall(sample))
    total = cjk + kana + hangul + latin
    if total == 0:
        return "und"
    if kana > 0.1 * total:
        return "ja"
    if hangul > 0.3 * total:
        return "ko"
    if cjk > 0.3 * total or cjk > latin:
        return "zh"
    return "en"
