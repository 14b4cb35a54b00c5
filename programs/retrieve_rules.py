"""The cheap half of the hybrid retrieve decision: plain rules over the question text (English, Chinese).

:func:`rule_decision` returns ``"yes"`` (always retrieve), ``"no"`` (skip retrieval without asking the
model) or ``None`` (no rule applies: ask the model judge). The rules are conservative: a "no" rule
only fires when the whole message is arithmetic, a unit conversion, a greeting / thanks / goodbye, or
a request to rewrite, translate or transform text the user gave (quoted, or after a colon). An
explicit reference to documents ("in the handbook", "according to the policy", "根据合同") is checked
first and always retrieves; after the "no" rules, an impersonal factual wh-question ("Who designed …",
"… 是哪一年竣工的？": a question word, no I/you, no quoted text) retrieves too — over the user's documents
that is what the judge would say, and it saves its ~200 prompt tokens on most questions. Everything
else (creative tasks, advice, questions about the user or the assistant) goes to the judge.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, NamedTuple

RuleName = Literal["documents", "arithmetic", "unit_conversion", "greeting", "given_text", "factual_question"]


class RuleMatch(NamedTuple):
    decision: Literal["yes", "no"]
    rule: RuleName


def rule_decision(question: str) -> Literal["yes", "no"] | None:
    """``"yes"`` / ``"no"`` when a rule decides, ``None`` to ask the model judge."""
    match = match_rule(question)
    return match.decision if match else None


def match_rule(question: str) -> RuleMatch | None:
    """The first rule that decides the question (for the trace), or None."""
    text = normalise(question)
    if not text:
        return None
    if mentions_documents(text):
        return RuleMatch("yes", "documents")
    if is_arithmetic(text):
        return RuleMatch("no", "arithmetic")
    if is_unit_conversion(text):
        return RuleMatch("no", "unit_conversion")
    if is_greeting(text):
        return RuleMatch("no", "greeting")
    if is_given_text_task(text):
        return RuleMatch("no", "given_text")
    if is_factual_question(text):
        return RuleMatch("yes", "factual_question")
    return None


# ---------------------------------------------------------------------- normalisation
_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "「": '"', "」": '"', "『": '"', "』": '"',
                         "«": '"', "»": '"', "×": "*", "÷": "/"})
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def normalise(question: str) -> str:
    """NFKC (full-width → ASCII), lower case, straight quotes, ``×``/``÷`` as ``*``/``/``, no
    thousands separators, single spaces."""
    text = unicodedata.normalize("NFKC", question or "").translate(_QUOTES).lower()
    text = _THOUSANDS.sub("", text)
    return " ".join(text.split())


_QUOTED = re.compile(r"\"[^\"]+\"|(?:(?<=^)|(?<=[\s:(\[，：把将]))'.+?'(?=$|[\s.,;:!?)\]。，！？的改翻])")


def quoted_spans(text: str) -> list[str]:
    return [m.group(0)[1:-1] for m in _QUOTED.finditer(text)]


def without_quotes(text: str) -> str:
    return _QUOTED.sub(" ", text)


def _given_text(text: str) -> bool:
    """Text the user supplied to work on: a quoted span, or something after a colon."""
    if any(span.strip() for span in quoted_spans(text)):
        return True
    after = re.search(r"[:：]\s*(\S.*)$", text)
    return bool(after and len(after.group(1).strip(" .?!。？！")) >= 2)


# ---------------------------------------------------------------------- documents → "yes"
_DOC_NOUNS = (
    r"documents?|docs?|documentation|files?|handbook|manual|guide|guidelines?|polic(?:y|ies)|contract|"
    r"agreement|reports?|wiki|knowledge base|kb|brochure|leaflet|minutes|runbook|specification|spec|"
    r"readme|faq|website|web ?site|page|article|paper|slides|transcript|release notes|regulations?|"
    r"records?|notes|sources?|corpus|collection|pdf|attachment|datasheet|terms|charter|bylaws|memo"
)
_DOC_EN = re.compile(
    rf"\baccording to (?:the|our|my|your|its|their|his|her|this|that|these|those)\b"
    rf"|\b(?:in|from|within|inside|of) (?:the|our|my|your|its|their|attached|uploaded|provided)"
    rf"(?: [\w'-]+){{0,3}}? (?:{_DOC_NOUNS})\b"
    rf"|\b(?:our|my) (?:[\w'-]+ ){{0,2}}(?:{_DOC_NOUNS})\b"
    rf"|\b(?:{_DOC_NOUNS}) (?:says?|states?|mentions?|lists?|specif(?:y|ies)|describes?|recommends?|defines?)\b"
)
_DOC_ZH_NOUNS = r"文档|文件|资料|手册|合同|协议|报告|制度|规定|政策|指南|说明书|知识库|条款|章程|纪要|网站|材料"
_DOC_ZH = re.compile(rf"(?:根据|按照|依据|参照).{{0,15}}?(?:{_DOC_ZH_NOUNS}|第.{{1,4}}条)|(?:{_DOC_ZH_NOUNS})(?:中|里|上|内)")


def mentions_documents(text: str) -> bool:
    """An explicit pointer at the user's documents, outside any quoted text."""
    bare = without_quotes(text)
    return bool(_DOC_EN.search(bare) or _DOC_ZH.search(bare))


# ---------------------------------------------------------------------- arithmetic → "no"
_NUMBER = re.compile(r"^(?:\d+(?:\.\d+)?%?|\.\d+%?|\d+/\d+)$")
_OPERATORS = {
    "+", "-", "*", "/", "^", "=", "%", "plus", "minus", "times", "multiplied", "multiply", "divided", "divide",
    "over", "add", "added", "subtract", "subtracted", "sum", "product", "difference", "quotient", "average",
    "mean", "median", "square", "squared", "cube", "cubed", "root", "power", "factorial", "percent",
    "percentage", "fraction", "decimal", "round", "rounded", "prime", "even", "odd", "divisible", "remainder",
    "mod", "modulo", "half", "twice", "double", "triple", "equals", "sqrt",
}
_FILLER = {
    "what", "whats", "what's", "is", "are", "the", "of", "and", "by", "to", "from", "a", "an", "as", "in", "into",
    "how", "much", "calculate", "compute", "evaluate", "work", "out", "solve", "please", "me", "tell", "can",
    "could", "you", "give", "answer", "result", "equal", "places", "place", "nearest", "whole", "number",
    "numbers", "integer", "significant", "figures", "digits", "then", "with", "when", "get", "do", "i", "if",
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "hundred", "thousand", "(", ")",
}
_TOKEN = re.compile(r"\d+/\d+|\d+(?:\.\d+)?%?|\.\d+%?|[a-z']+|[+\-*/^=%()]")
_ZH_NUM = r"(?:\d+(?:\.\d+)?%?|[零〇一二两三四五六七八九十百千万亿点]+)"  # digits, or a Chinese numeral
_ZH_OP = r"(?:加上|加|减去|减|乘以|乘|除以|除|[+\-*/^])"
_ZH_ARITH = re.compile(
    rf"^(?:请问|请|帮我)?(?:计算一下|计算|算一下|算算|求)?"
    rf"(?:{_ZH_NUM}(?:{_ZH_OP}{_ZH_NUM})+|{_ZH_NUM}的(?:平方根|立方根|平方|立方|阶乘))"
    rf"(?:等于多少|等于几|是多少|是几|得多少|得几|等于)?[?？。!！=]*$"
)


def is_arithmetic(text: str) -> bool:
    """The whole message is a calculation: numbers, operators and nothing but filler words."""
    compact = text.replace(" ", "")
    if _ZH_ARITH.match(compact):
        return True
    stripped = text.strip(" ?!.。？！")
    tokens = _TOKEN.findall(stripped)
    if not tokens or len("".join(tokens)) < len(stripped.replace(" ", "")) - stripped.count(","):
        return False  # characters outside the vocabulary (CJK, symbols): not a plain calculation
    numbers = [t for t in tokens if _NUMBER.match(t)]
    operators = [t for t in tokens if t in _OPERATORS or (t.endswith("%") and _NUMBER.match(t))]
    words_ok = all(_NUMBER.match(t) or t in _OPERATORS or t in _FILLER for t in tokens)
    return words_ok and bool(numbers) and bool(operators)


# ---------------------------------------------------------------------- unit conversion → "no"
_UNITS_EN = (
    r"(?:milli|centi|kilo)?(?:met(?:re|er)s?|grams?|lit(?:re|er)s?)|mm|cm|m|km|mg|g|kg|ml|l|"
    r"inch(?:es)?|foot|feet|ft|yards?|miles?|tonnes?|tons?|pounds?|lbs?|ounces?|oz|stones?|gallons?|pints?|"
    r"quarts?|cups?|(?:milli)?seconds?|minutes?|hours?|days?|weeks?|fortnights?|years?|decades?|centur(?:y|ies)|"
    r"(?:degrees? )?(?:celsius|fahrenheit|kelvin|centigrade)|mph|kph|km/h|m/s|knots?|"
    r"(?:miles?|kilomet(?:re|er)s?|met(?:re|er)s?) (?:per|an|a) (?:hour|second)|"
    r"acres?|hectares?|square (?:met(?:re|er)s?|kilomet(?:re|er)s?|miles?|feet|foot)|"
    r"bits?|bytes?|(?:kilo|mega|giga|tera)bytes?|kb|mb|gb|tb"
)
_NUM_EN = r"(?:\d+(?:\.\d+)?|\.\d+|a|an|one|half an?|a half)"
_UNIT_PATTERNS_EN = [
    rf"^(?:please )?(?:convert|change|express|turn) (?:{_NUM_EN} )?(?:{_UNITS_EN}) (?:in|to|into) (?:{_UNITS_EN})$",
    rf"^how many (?:{_UNITS_EN}) (?:are |is )?(?:there )?(?:are |is )?in (?:{_NUM_EN}) (?:{_UNITS_EN})$",
    rf"^how many (?:{_UNITS_EN}) (?:is|are|make|makes|make up|in) (?:{_NUM_EN}) (?:{_UNITS_EN})$",
    rf"^(?:what is |what's |how much is |how long is |how far is )?(?:{_NUM_EN}) (?:{_UNITS_EN}) "
    rf"(?:in|to|into|as) (?:{_UNITS_EN})$",
]
_UNIT_EN = [re.compile(p) for p in _UNIT_PATTERNS_EN]
_UNITS_ZH = r"毫米|厘米|分米|千米|公里|米|毫克|千克|公斤|克|斤|吨|毫升|升|毫秒|秒|分钟|小时|天|周|星期|摄氏度|华氏度|英里|英尺|英寸|码|磅|盎司|亩|公顷"
_UNIT_ZH = re.compile(
    rf"^(?:请问)?(?:\d+(?:\.\d+)?|一|两|半)?(?:{_UNITS_ZH})(?:等于|是|合|折合|换算成|换算为|相当于)"
    rf"(?:多少|几)个?(?:{_UNITS_ZH})[?？。!！]*$"
)


def is_unit_conversion(text: str) -> bool:
    """The whole message converts a quantity between two units ("convert 5 km to miles", "1米等于多少厘米")."""
    stripped = text.strip(" ?!.。？！")
    return any(p.match(stripped) for p in _UNIT_EN) or bool(_UNIT_ZH.match(text.replace(" ", "")))


# ---------------------------------------------------------------------- greetings → "no"
_GREETING_EN = re.compile(
    r"^(?:(?:oh |well )?(?:hi|hello|hey|hiya|howdy|greetings|yo)(?: there| everyone| all| again| friend)?"
    r"|good (?:morning|afternoon|evening|night|day)(?: to you)?"
    r"|(?:thanks|thank you|thx|ty|many thanks|cheers)(?: (?:so|very) much| a lot| again| a million)?"
    r"(?: for (?:your|the|all the|all your) help| for helping(?: me)?)?"
    r"|(?:that|this|it)(?:'s| was| is) (?:really |very |so |super )?(?:helpful|great|useful|perfect|awesome|nice|"
    r"kind of you|very kind)"
    r"|(?:bye|bye bye|goodbye|good bye|see you|see ya|farewell|take care|cya)(?: later| soon| tomorrow| then)?"
    r"|(?:talk|speak) to you (?:later|soon|tomorrow)"
    r"|(?:nice|pleased|glad|good|great) to meet you(?: too)?"
    r"|how are you(?: doing)?(?: today)?|how's it going|how do you do|what's up|whats up|sup"
    r"|who are you|what are you|what's your name|what is your name"
    r"|ok|okay|cool|great|awesome|perfect|got it|sure|yes|no|yeah|nope|lol)$"
)
_GREETING_ZH = re.compile(
    r"^(?:你好|您好|嗨|哈喽|哈啰|早上好|早安|上午好|中午好|下午好|晚上好|晚安|大家好"
    r"|谢谢(?:你|您)?(?:的帮助)?(?:啦|了)?|多谢|非常感谢|感谢(?:你|您)?(?:的帮助)?|辛苦了"
    r"|再见|拜拜|回头见|明天见|下次见|你是谁|你叫什么名字?"
    r"|(?:你)?(?:今天|最近)(?:过得)?(?:怎么样|好吗)|你好吗|好的|明白了|知道了)$"
)


def is_greeting(text: str) -> bool:
    """Every clause of the message is a greeting, thanks, goodbye or small talk about the assistant."""
    clauses = [c.strip() for c in re.split(r"[,.!?;~，。！？；、\n]+", text) if c.strip()]
    return bool(clauses) and all(_GREETING_EN.match(c) or _GREETING_ZH.match(c.replace(" ", "")) for c in clauses)


# ---------------------------------------------------------------------- given text → "no"
_TRANSFORM_EN = re.compile(
    r"^(?:(?:please|can you|could you|would you|help me|i need you to|kindly)\s+)*"
    r"(?:re-?write|reword|rephrase|paraphrase|translate|summari[sz]e|shorten|simplify|condense|expand|proofread|"
    r"polish|edit|correct|improve|fix|tidy|capitali[sz]e|uppercase|lowercase|reverse|spell|sort|alphabeti[sz]e|"
    r"count the (?:words|letters|vowels|consonants|characters|syllables)|make (?:this|the|it|these)|"
    r"put (?:this|the|these)|turn (?:this|the|these)|change (?:this|the)|convert (?:this|the) "
    r"(?:text|sentence|paragraph|list|phrase))\b"
)
_TRANSFORM_ZH = re.compile(
    r"(?:把|将).+?(?:翻译|译成|译为|改写|改成|改得|改为|润色|缩短|精简|扩写|转换成|转成|总结|概括)"
    r"|^(?:请|帮我|麻烦)?(?:翻译|改写|润色|总结|概括|缩写|扩写|校对|纠正)"
)


def is_given_text_task(text: str) -> bool:
    """A request to rewrite, translate or transform text supplied in the message itself."""
    return bool(_TRANSFORM_EN.match(text) or _TRANSFORM_ZH.search(text.replace(" ", ""))) and _given_text(text)


# ---------------------------------------------------------------------- factual question → "yes"
_WH_EN = re.compile(
    r"^(?:who|whom|whose|when|where|which|what|why|how (?:many|much|long|old|far|big|tall|high|deep|did|does|do|"
    r"was|were|is|are)|in (?:what|which)|on (?:what|which)|at (?:what|which)|from (?:what|which)|to (?:what|which))\b"
)
_PERSONAL_EN = re.compile(r"\b(?:i|i'm|i've|i'd|me|my|we|us|our|you|your|yours|you're|let's)\b")
_WH_ZH = re.compile(r"谁|何时|什么时候|哪|多少|多[长高大远重久深宽]|几[个年月天次位种岁]|什么|为什么|怎样|怎么|如何|是否")
_PERSONAL_ZH = re.compile(r"我|你|您|咱|写一|帮")


def is_factual_question(text: str) -> bool:
    """An impersonal question asking for a fact: it starts with a question word (English) or holds one
    (Chinese), names neither the user nor the assistant, and quotes no text to work on."""
    if quoted_spans(text):
        return False
    if _WH_EN.match(text):
        return len(text.split()) >= 4 and not _PERSONAL_EN.search(text)
    compact = text.replace(" ", "")
    return len(compact) >= 4 and bool(_WH_ZH.search(compact)) and not _PERSONAL_ZH.search(compact) and bool(re.search(r"[\u4e00-\u9fff]", compact))
