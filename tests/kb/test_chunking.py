from __future__ import annotations

import numpy as np
import pytest

from selfrag.kb.chunking import RecursiveChunker, SemanticChunker, split_sentences
from selfrag.kb.text import bm25_tokens, detect_language

ZH = "自然语言处理是人工智能的一个分支。它研究人与计算机之间的通信！这可能吗？是的。"


def test_chinese_sentences_end_at_cjk_terminators_without_spaces():
    assert split_sentences(ZH) == [
        "自然语言处理是人工智能的一个分支。", "它研究人与计算机之间的通信！", "这可能吗？", "是的。",
    ]


def test_sentence_split_is_lossless_and_keeps_decimals():
    text = 'Pi is 3.14 today. "Really?" Yes! 他说：“好。”然后走了。'
    parts = split_sentences(text)
    assert "".join(parts) == text
    assert parts[0] == "Pi is 3.14 today. "
    assert parts[1] == '"Really?" '
    assert parts[3] == "他说：“好。”"


def test_recursive_chinese_chunks_break_at_sentence_ends_with_overlap():
    # sentence lengths: 17, 14, 5, 3
    chunks = RecursiveChunker(size=32, overlap=6).chunk(ZH)
    assert chunks == [
        "自然语言处理是人工智能的一个分支。它研究人与计算机之间的通信！",  # 31 chars
        "这可能吗？是的。",  # previous tail (14 chars) exceeds overlap, so no carry-over
    ]
    chunks = RecursiveChunker(size=20, overlap=8).chunk(ZH)
    assert chunks == ["自然语言处理是人工智能的一个分支。", "它研究人与计算机之间的通信！这可能吗？", "这可能吗？是的。"]
    for c in chunks:
        assert len(c) <= 20


def test_recursive_prefers_paragraphs_and_respects_size():
    text = ("Alpha beta gamma. " * 5).strip() + "\n\n" + ("Delta epsilon. " * 5).strip()
    chunks = RecursiveChunker(size=100, overlap=0).chunk(text)
    assert chunks == [("Alpha beta gamma. " * 5).strip(), ("Delta epsilon. " * 5).strip()]


def test_recursive_hard_splits_unpunctuated_cjk():
    text = "字" * 250
    chunks = RecursiveChunker(size=100, overlap=10).chunk(text)
    assert [len(c) for c in chunks] == [100, 100, 50]


def test_recursive_rejects_bad_args():
    with pytest.raises(ValueError, match="overlap"):
        RecursiveChunker(size=10, overlap=10)
    with pytest.raises(ValueError, match="size"):
        RecursiveChunker(size=0)


class TopicEmbedder:
    """Sentences about cats map to e0, anything else to e1."""

    dim = 2
    name = "topic"

    def embed(self, texts):
        return np.array([[1.0, 0.0] if "cat" in t.lower() else [0.0, 1.0] for t in texts], dtype=np.float32)


def test_semantic_chunker_splits_where_similarity_drops():
    text = "Cats purr. A cat sleeps a lot. Stocks fell today. Markets were volatile. My cat is grey."
    chunks = SemanticChunker(TopicEmbedder(), threshold=0.5, size=500).chunk(text)
    assert chunks == ["Cats purr. A cat sleeps a lot.", "Stocks fell today. Markets were volatile.", "My cat is grey."]


def test_semantic_chunker_caps_size():
    text = "Cat one. Cat two. Cat three. Cat four."
    chunks = SemanticChunker(TopicEmbedder(), threshold=0.5, size=20).chunk(text)
    assert all(len(c) <= 20 for c in chunks) and len(chunks) == 2


def test_bm25_tokens_segment_chinese_and_lowercase_words():
    toks = bm25_tokens("Running DOGS 自然语言处理")
    assert "run" in toks and "dog" in toks
    assert "自然语言" in toks or "自然" in toks
    assert all(" " not in t for t in toks)


def test_detect_language():
    assert detect_language(ZH) == "zh"
    assert detect_language("The cat sat on the mat.") == "en"
    assert detect_language("1234 ...") == "und"
