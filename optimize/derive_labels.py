"""The text operations the training-data builder (:mod:`optimize.derive`) labels with: whether a passage
holds an answer, the sentence that shows it, and the made-up answers of the negative support and
usefulness examples — a partial answer (the gold answer plus a claim the passage does not back) and
an answer with one number or name changed. Each returns what it did, for the record's provenance.

Nothing here invents facts from nowhere: the extra claim of a partial answer is a sentence of another
retrieved passage, a changed name is a name from another passage, a changed number is the gold number
shifted by a hashed amount (so the same input always gives the same output).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from optimize.metrics import has_cjk, normalize_cjk, tokens
from optimize.records import answer_overlap, contains_text
from optimize.sources import normalize_question, stable_hash

SPAN_OVERLAP = 0.8  # a passage "holds" a long free-text answer when it has this share of its content words
# (of its characters for a CJK answer)
CLAIM_MAX_OVERLAP = 0.3  # an extra claim shares at most this share of its words with the gold passage
CLAIM_CHARS = (30, 300)

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w])")
_NAME = re.compile(r"\b[A-Z][\w'’-]*[a-z0-9][\w'’-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'’-]+)*")
_CALENDAR = (
    "January February March April May June July August September October November December".split(),
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
)
_NAME_STOP = frozenset(
    "the a an in on at of for and or but it its this that these those he she they we you i there here "
    "what who when where why how which yes no also however after before during while if then".split())


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (a line break ends one too; Markdown heading lines are left out)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s and s.strip() and not _HEADING.match(s)]


def character_overlap(answer: str, passage: str) -> float:
    """Share of the answer's characters (CJK characters and Latin/digit runs, as the Chinese F1 of
    :mod:`optimize.metrics` counts them, repeats included) found in passage."""
    wanted = Counter(tokens(answer, cjk=True))
    if not wanted:
        return 0.0
    return sum((wanted & Counter(tokens(passage, cjk=True))).values()) / sum(wanted.values())


def answer_share(answer: str, passage: str) -> float:
    """Share of ``answer`` found in ``passage``: its characters for a CJK answer (no spaces between
    words), else its content words."""
    return character_overlap(answer, passage) if has_cjk(answer) else answer_overlap(answer, passage)


def states_answer(passage: str, answer: str) -> bool:
    """Whether the normalised answer appears in ``passage``: as a substring for a CJK answer, else as
    whole words."""
    if has_cjk(answer):
        span = normalize_cjk(answer)
        return bool(span) and span in normalize_cjk(passage)
    span = normalize_question(answer)
    return bool(span) and f" {span} " in f" {normalize_question(passage)} "


def holds_answer(passage: str, answer: str) -> tuple[bool, float]:
    """Whether ``passage`` holds ``answer`` (:func:`states_answer`, or it has ``SPAN_OVERLAP`` of the
    answer, :func:`answer_share`), and that share."""
    overlap = answer_share(answer, passage)
    return states_answer(passage, answer) or overlap >= SPAN_OVERLAP, round(overlap, 3)


def evidence_sentence(passage: str, answer: str, max_chars: int = 240) -> str:
    """The sentence of ``passage`` that shares the most content words with ``answer`` (first on ties)."""
    best, best_score = "", -1.0
    for s in sentences(passage):
        score = answer_share(answer, s) if not contains_text(s, answer) else 2.0
        if score > best_score:
            best, best_score = s, score
    return best[:max_chars] + ("…" if len(best) > max_chars else "")


def unbacked_claim(other_passage: str, gold_passage: str, answer: str) -> str | None:
    """A sentence of ``other_passage`` the gold passage does not back (few shared content words, not
    part of the answer), of a readable length; None when there is none."""
    lo, hi = CLAIM_CHARS
    for s in sentences(other_passage):
        if not lo <= len(s) <= hi or len(normalize_question(s).split()) < 5:
            continue
        if answer_overlap(s, gold_passage) <= CLAIM_MAX_OVERLAP and answer_overlap(s, answer) <= CLAIM_MAX_OVERLAP:
            return s
    return None


def partial_answer(answer: str, claim: str) -> str:
    """The gold answer followed by an extra claim."""
    answer = answer.strip()
    joiner = " " if answer.endswith((".", "!", "?", "。", "！", "？")) else ". "
    return answer + joiner + claim.strip()


@dataclass(frozen=True)
class Change:
    answer: str  # the changed answer
    kind: str  # "number" | "name"
    old: str
    new: str

    @property
    def claim(self) -> str:
        """The sentence of the changed answer that carries the change."""
        return next((s for s in sentences(self.answer) if self.new in s), self.answer)


def _shifted(number: str, key: str, passage: str) -> str | None:
    """``number`` shifted by 1..9 (by hash of ``key``), written the same way, and not in ``passage``."""
    digits = number.replace(",", "")
    whole, _, frac = digits.partition(".")
    start = int(stable_hash("shift:" + key)[:8], 16) % 9 + 1
    for step in range(9):
        delta = (start + step - 1) % 9 + 1
        if frac:
            new = f"{whole}.{(int(frac) + delta) % 10 ** len(frac):0{len(frac)}d}"
        else:
            value = int(whole) + delta
            new = f"{value:,}" if "," in number else str(value)
        if not re.search(rf"(?<![\w.]){re.escape(new)}(?![\w])", passage):
            return new
    return None


def _names(text: str) -> list[str]:
    """Capitalised word runs of ``text`` that look like names: not only stop words, and a single word
    opening a sentence only when it is also capitalised inside one (``Anglers need…`` is no name)."""
    found: list[tuple[str, bool]] = []
    for sentence in sentences(text):
        for m in _NAME.finditer(sentence):
            words = m.group(0).split()
            lead = next((i for i, w in enumerate(words) if w.lower() not in _NAME_STOP), len(words))
            if lead < len(words):  # leading stop words ("The Oda") are not part of the name
                found.append((" ".join(words[lead:]), m.start() == 0 and lead == 0))
    inside = {n for n, first in found if not first}
    return list(dict.fromkeys(n for n, first in found if not first or " " in n or n in inside))


def changed_answer(answer: str, gold_passage: str, other_passage: str, key: str) -> Change | None:
    """``answer`` with one fact changed: the first number of the answer that the gold passage states,
    shifted; else the first name (capitalised words) it states, swapped for a name of ``other_passage``
    that the gold passage does not mention (picked by hash of ``key``). None when neither exists."""
    for m in _NUMBER.finditer(answer):
        if not re.search(rf"(?<![\w.]){re.escape(m.group(0))}(?![\w])", gold_passage):
            continue
        new = _shifted(m.group(0), key, gold_passage)
        if new is not None:
            return Change(answer[:m.start()] + new + answer[m.end():], "number", m.group(0), new)
    gold_norm = f" {normalize_question(gold_passage)} "

    def in_gold(name: str) -> bool:
        return f" {normalize_question(name)} " in gold_norm

    mine = [n for n in _names(answer) if in_gold(n)]
    if not mine:
        return None
    old = mine[0]
    calendar = next((c for c in _CALENDAR if old in c), None)
    if calendar is not None:  # a month or weekday becomes another one
        others = [n for n in calendar if not in_gold(n)]
    else:  # a name of another passage, of as many words when there is one
        others = [n for n in _names(other_passage) if not in_gold(n)
                  and not contains_text(answer, n) and len(n) > 2 and not any(n in c for c in _CALENDAR)]
        same_length = [n for n in others if len(n.split()) == len(old.split())]
        others = same_length or others
    if not others:
        return None
    new = sorted(others, key=lambda n: stable_hash(f"name:{key}:{n}"))[0]
    return Change(answer.replace(old, new, 1), "name", old, new)
