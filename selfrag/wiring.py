"""The one place that turns resolved :class:`Settings` into objects: knowledge base, LMs, web, program.

Everything else takes these objects as constructor arguments; nothing reads settings or the
environment on its own (the Tavily key is read by the web factory, once, when wiring).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selfrag import paths
from selfrag.settings import Settings

if TYPE_CHECKING:  # heavy imports stay out of CLI start-up
    import dspy

    from programs.crag import CorrectiveRAG
    from programs.selfrag import SelfRAG
    from selfrag.kb import KnowledgeBase
    from programs.types import WebSearch

logger = logging.getLogger(__name__)


def build_knowledge_base(settings: Settings, collection: str | None = None, embedder: Any = None) -> KnowledgeBase:
    from selfrag.kb.factory import build_knowledge_base as _build

    kb_settings = settings.kb if collection is None else settings.kb.model_copy(update={"collection": collection})
    return _build(kb_settings, settings.retrieval, embedder=embedder)


def ensure_demo_corpus(kb: KnowledgeBase, progress: bool = False) -> bool:
    """Ingest the bundled demo corpus into an empty knowledge base. Returns True when it did."""
    if not kb.is_empty():
        return False
    logger.info("knowledge base is empty: ingesting the demo corpus from %s", paths.demo_corpus())
    kb.ingest([p for p in sorted(paths.demo_corpus().glob("*.md")) if p.name != "README.md"], progress=progress)
    return True


def build_web(settings: Settings, embedder: Any = None) -> WebSearch | None:
    from selfrag.web.factory import build_web_search

    offline_retriever = None
    if settings.web.backend == "offline":
        web_kb = build_knowledge_base(settings, collection=settings.web.offline_collection, embedder=embedder)
        if web_kb.is_empty():
            from selfrag.web.offline import offline_web_documents

            logger.info("building the offline web collection %r", settings.web.offline_collection)
            web_kb.add_documents(offline_web_documents(paths.datasets_dir()))
        offline_retriever = web_kb.retriever()
    return build_web_search(settings.web, offline_retriever=offline_retriever)


def build_lms(settings: Settings) -> tuple[dspy.LM, dspy.LM | None, dspy.Adapter]:
    from selfrag.lm.factory import build_adapter, build_lm

    generator = build_lm(settings.lm)
    critic = build_lm(settings.lm, role="critic") if settings.lm.critic_model else None
    return generator, critic, build_adapter(settings.lm)


@dataclass
class Runtime:
    """The wired objects for one process: the program and what it was built from."""

    settings: Settings
    kb: KnowledgeBase
    program: SelfRAG | CorrectiveRAG
    ingested_demo: bool = False


def build_runtime(settings: Settings, *, retriever: Any = None, lms: tuple | None = None,
                  load_default_artifact: bool = True, progress: bool = False) -> Runtime:
    """Build knowledge base (ingesting the demo corpus when empty), LMs, web search and the program,
    then load the compiled artifact (``settings.program_path``, else the shipped default if present)."""
    from programs.artifacts import load_state_into
    from programs.crag import CorrectiveRAG
    from programs.selfrag import SelfRAG

    kb = build_knowledge_base(settings)
    ingested = False
    if retriever is None:
        ingested = ensure_demo_corpus(kb, progress=progress)
        retriever = kb.retriever()
    generator, critic, adapter = lms if lms is not None else build_lms(settings)
    program_cls = CorrectiveRAG if settings.program.strategy == "crag" else SelfRAG
    program = program_cls(retriever, web_search=build_web(settings), config=settings.program,
                      generator_lm=generator, critic_lm=critic, adapter=adapter)
    shipped = paths.default_artifact()
    default = shipped if program_cls is SelfRAG and load_default_artifact and shipped.is_file() else None
    artifact = settings.program_path or default
    if artifact is not None:
        load_state_into(program, Path(artifact))
    return Runtime(settings=settings, kb=kb, program=program, ingested_demo=ingested)
