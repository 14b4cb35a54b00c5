"""optimize/stages.py: the end-to-end collection the compile stages answer from."""

import pytest


def test_an_empty_collection_without_its_corpus_is_a_one_line_compile_error(tmp_path):
    from optimize.errors import CompileError
    from optimize.stages import e2e_knowledge_base

    class EmptyKB:
        added = []

        def is_empty(self):
            return True

        def add_documents(self, docs):
            self.added.extend(docs)

    kb = EmptyKB()
    with pytest.raises(CompileError, match=r"the 'clapnq' collection is empty and its corpus is missing: .*"
                                           r"answerable.jsonl \(set SELFRAG_DATASETS"):
        e2e_knowledge_base(lambda name: kb, tmp_path / "no-datasets")
    assert kb.added == []
