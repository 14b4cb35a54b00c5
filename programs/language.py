"""The language a question is asked in, and the program's own words in that language: the abstention
answer (``ABSTAIN_ANSWERS``) and what each abstain reason means (``ABSTAIN_REASONS_ZH`` next to
:data:`programs.thresholds.ABSTAIN_REASONS`). A question is Chinese when its Chinese words (CJK characters,
two to a word) are more than a third of its words (a Latin product name inside a Chinese question keeps it
Chinese; a Chinese name inside an English question keeps it English)."""

from __future__ import annotations

import re

_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")
CJK_QUESTION_SHARE = 1 / 3

ABSTAIN_ANSWERS = {
    "en": "I could not find this in the available sources.",
    "zh": "在现有资料中没有找到这个问题的答案。",
}

ABSTAIN_REASONS_ZH: dict[str, str] = {
    "no_relevant_passage": "已检索并评估了段落（包括允许的所有改写和网络搜索），但没有段落达到相关性阈值",
    "low_similarity": "知识库返回的段落与问题都不够接近（最高的向量相似度低于阈值，包括允许的所有改写和网络搜索）",
    "no_answer_in_passages": "找到了相关段落，但每个候选回答的生成都表示这些段落不能回答该问题",
    "answer_not_stated": "找到了相关段落，但答案检查判断这些段落没有给出问题的答案（P(stated) 低于阈值），且没有剩余的网络搜索轮次",
    "unsupported": "最佳候选回答最可能的支持标签是“否”：段落不支持该回答",
    "low_confidence": "最佳候选回答得到（部分）支持（或通过了答案检查而未经支持判断，其置信度即 P(stated)），但其置信度低于回答阈值",
    "web_failed": "知识库中没有可用内容，网络搜索回退也失败了（无密钥、限流、超时、无结果……）；轨迹步骤记录了错误类型",
    "retrieval_failed": "无法搜索知识库（存储错误、集合缺失或为空）",
    "lm_error": "生成回答所需的模型调用失败（超时、解析错误、后端错误）",
    "direct_unanswerable": "问题被判定为无需检索直接回答，但模型没有给出答案",
}


def question_language(text: str) -> str:
    """``"zh"`` when its Chinese words are more than a third of the words of ``text``, else ``"en"``: words,
    not letters — a Chinese word is about two characters, a Latin one a run of letters (a config name like
    HorizontalPodAutoscaler is one word, not 23 letters outweighing the Chinese around it)."""
    cjk_words = len(_CJK.findall(text)) / 2
    latin_words = len(_LATIN_WORD.findall(text))
    return "zh" if cjk_words and cjk_words > CJK_QUESTION_SHARE * (cjk_words + latin_words) else "en"


def abstain_answer(question: str) -> str:
    """What an abstaining program answers, in the question's language."""
    return ABSTAIN_ANSWERS[question_language(question)]
