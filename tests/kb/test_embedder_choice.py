"""kb.embedding_model picks the embedder; a collection refuses another embedder with a clear message."""

import pytest

from selfrag.errors import InputError
from selfrag.kb.embedder import HashEmbedder, make_embedder
from selfrag.kb.factory import build_knowledge_base
from selfrag.settings import KBSettings, RetrievalSettings


@pytest.mark.parametrize("name,cls", [("use-m3", "UseM3Embedder"), ("e5-small", "E5SmallEmbedder"),
                                      ("hash-64", "HashEmbedder")])
def test_names_map_to_embedders(name, cls):
    emb = make_embedder(name)
    assert type(emb).__name__ == cls and emb.name == (name if not name.startswith("hash") else emb.name)


def test_a_collection_refuses_a_different_embedder(tmp_path):
    kb = build_knowledge_base(KBSettings(path=tmp_path), RetrievalSettings(), embedder=HashEmbedder(64))
    kb.add_documents([("Der Heron fährt 80 km.", {"source": "a.md"})])
    other = build_knowledge_base(KBSettings(path=tmp_path), RetrievalSettings(), embedder=HashEmbedder(32))
    with pytest.raises(InputError, match="was built with embedder"):
        other.add_documents([("more", {"source": "b.md"})])
