"""The composition root: the one place that turns resolved :class:`Settings` into objects —
knowledge base, LMs, web search and the program (named by ``program.strategy`` in
:mod:`programs.registry`) — and :func:`load_compiled`, an artifact to a ready program in one line.

Everything else takes these objects as constructor arguments; nothing reads settings or the
environment on its own (the Tavily key is read by the web factory, once, when wiring).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selfrag import paths
from selfrag.settings import AUTO_EMBEDDER, Settings

if TYPE_CHECKING:  # heavy imports stay out of CLI start-up
    import dspy

    from programs.base import RAGModule
    from programs.types import RAGResult, Retriever, WebSearch
    from selfrag.kb import KnowledgeBase
    from selfrag.kb.indexes import IndexReport

logger = logging.getLogger(__name__)

DEMO_DESCRIPTION = ("Demo corpus: Kestrel Works, a fictional maker of electric cargo bikes (the Heron and "
                    "Swift models, batteries, the app, accessories, warranty, delivery; English and Chinese)")


def build_knowledge_base(settings: Settings, collection: str | None = None, embedder: Any = None) -> KnowledgeBase:
    from selfrag.kb.factory import build_knowledge_base as _build

    kb_settings = settings.kb if collection is None else settings.kb.model_copy(update={"collection": collection})
    return _build(kb_settings, settings.retrieval, embedder=embedder)


def ensure_demo_corpus(kb: KnowledgeBase, progress: bool = False) -> bool:
    """Ingest the bundled demo corpus into ``kb`` when it is empty. Returns True when it did. The
    caller decides whether ``kb`` may receive it (:func:`build_runtime` only gives it to the default
    collection at the default path, :func:`selfrag.kb.factory.is_default_knowledge_base`)."""
    if not kb.is_empty():
        return False
    from selfrag.kb.collection_info import get_description, set_description

    logger.info("knowledge base is empty: ingesting the demo corpus from %s", paths.demo_corpus())
    kb.ingest([p for p in sorted(paths.demo_corpus().glob("*.md")) if p.name != "README.md"], progress=progress)
    if not get_description(kb.store):  # what a router (program.route_collections) reads about it
        set_description(kb.store, DEMO_DESCRIPTION)
    return True


def build_retriever(settings: Settings, kb: KnowledgeBase, mode: str | None = None) -> Retriever:
    """``kb``'s retriever (``retrieval.mode``, or ``mode``), over the index named by ``retrieval.index``
    when one is set; :class:`~selfrag.errors.InputError` when that index has not been built."""
    kind = settings.retrieval.index
    if kind == "none":
        retriever = kb.retriever(mode)
    else:
        from selfrag.errors import InputError
        from selfrag.kb.indexes import index_retriever

        try:
            retriever = index_retriever(kb, kind, mode)
        except ValueError as exc:
            raise InputError(f"retrieval.index = {kind!r}: {exc}") from None
    return rescored(settings, retriever)


def rescored(settings: Settings, retriever: Retriever) -> Retriever:
    """``retriever`` with its passages' similarity re-scored by ``retrieval.similarity_embedder`` when one is
    set (:class:`selfrag.kb.rescore.RescoredRetriever`; the embedder is loaded once per process). ``"auto"``:
    e5-small over the collections embedded with the bundled embedders (MiniLM, use-m3: the scales the shipped
    artifact's ``e5-small@en`` / ``e5-small@zh`` sets are fitted on), nothing over the others (a collection
    whose embedder is not chosen yet is wrapped and decides at each query); the embedder then loads at the
    first re-scoring."""
    name = settings.retrieval.similarity_embedder
    if not name:
        return retriever
    from selfrag.errors import ConfigError
    from programs.retriever_calls import retriever_embedder
    from selfrag.kb.auto_embedder import ENGLISH_EMBEDDER, MULTILINGUAL_EMBEDDER
    from selfrag.kb.rescore import RescoredRetriever

    if name == AUTO_SIMILARITY:
        over = frozenset({ENGLISH_EMBEDDER, MULTILINGUAL_EMBEDDER})
        if retriever_embedder(retriever) not in (*over, AUTO_EMBEDDER):
            return retriever  # another embedder, or an index naming no embedder: nothing to re-score
        return RescoredRetriever(retriever, functools.partial(_rescore_embedder, AUTO_RESCORER),
                                 over=over, name=AUTO_RESCORER)
    try:
        return RescoredRetriever(retriever, _rescore_embedder(name))
    except ConfigError as exc:  # the embedder factory names kb.embedding_model; this is another setting
        raise ConfigError(str(exc).replace("kb.embedding_model", "retrieval.similarity_embedder", 1)) from None


AUTO_SIMILARITY = "auto"
AUTO_RESCORER = "e5-small"  # what "auto" re-scores with (bench_retrieval_signals, bench_gate_check)


@functools.lru_cache(maxsize=4)
def _rescore_embedder(name: str) -> Any:
    """The re-scoring embedder named ``name``, loaded once per process (a model load takes seconds)."""
    from selfrag.kb.embedder import make_embedder

    return make_embedder(name)


def build_indexes(settings: Settings, kb: KnowledgeBase, kinds: list[str], *,
                  representations: list[str] | None = None, progress: bool = True) -> list[IndexReport]:
    """Build (or update, idempotently) each index in ``kinds`` over ``kb``. The LM steps (summaries,
    hypothetical questions) use the generator LM of ``settings``, built once and only when an index
    needs it. ``representations``: the multi-representation children (default: all)."""
    from programs.summaries import LMQuestionWriter, LMSummariser
    from selfrag.kb.indexes import REPRESENTATIONS, build_index, needs_lm

    reps = list(representations or REPRESENTATIONS)
    summarise = questions = None
    if any(needs_lm(kind, reps) for kind in kinds):
        generator, _critic, adapter = build_lms(settings)
        summarise, questions = LMSummariser(generator, adapter), LMQuestionWriter(generator, adapter)
    reports = []
    for kind in kinds:
        options = {"representations": reps} if kind == "multi-representation" else {}
        reports.append(build_index(kb, kind, summarise=summarise, questions=questions, progress=progress, **options))
    return reports


def strategy_components(settings: Settings, kb: KnowledgeBase, retriever: Any) -> dict[str, Any]:
    """The constructor components of a ``StrategyRetrieval`` program answering from ``kb`` through
    ``retriever`` (:func:`build_retriever`): ``retriever`` (for ``route_collections`` one over ``kb``
    through ``retriever`` and the other described collections, each through its own :func:`build_retriever`:
    the same index and re-scoring; an index not built for one is refused the same way) and, for
    ``self_query``, ``metadata_schema``. The one place both ``build_runtime`` (ask, the service) and
    ``selfrag eval`` get them from."""
    from selfrag.kb.factory import describe_collections
    from selfrag.kb.strategy_components import strategy_components as _components

    others = []
    if settings.program.route_collections:
        others = [build_knowledge_base(settings, collection=c.name, embedder=kb.embedder)
                  for c in describe_collections(settings.kb)
                  if c.description and c.name not in (kb.name, settings.web.offline_collection)]
    return _components(kb, settings.program, others, retriever=retriever,
                       retriever_of=lambda other: build_retriever(settings, other))


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

    lp = {"logprobs": settings.lm.logprobs, "top_logprobs": settings.lm.top_logprobs}
    generator = build_lm(settings.lm, **lp)
    critic = build_lm(settings.lm, role="critic", **lp) if settings.lm.critic_model else None
    return generator, critic, build_adapter(settings.lm)


def build_teacher_lm(settings: Settings, teacher: str) -> dspy.LM:
    """The teacher LM of a compile (``selfrag compile --teacher``): a profile name (``local`` | ``tiny``),
    a ``.gguf`` path, or a LiteLLM model string (``openai/gpt-4o-mini``); the other LM settings stay."""
    from selfrag.lm.factory import build_lm

    if teacher in ("local", "tiny"):
        update = {"profile": teacher, "model": None}
    elif teacher.endswith(".gguf"):
        update = {"profile": "local", "model": teacher}
    else:
        update = {"profile": "litellm", "model": teacher}
    lm = settings.lm.model_copy(update={**update, "critic_model": None})
    return build_lm(lm, logprobs=settings.lm.logprobs, top_logprobs=settings.lm.top_logprobs)


@dataclass
class Runtime:
    """The wired objects for one process: the program and what it was built from."""

    settings: Settings
    kb: KnowledgeBase
    program: RAGModule
    ingested_demo: bool = False
    artifact: Path | None = None  # the compiled artifact loaded into the program, if any
    custom_retriever: bool = False  # the program does not read ``kb`` (the cache key cannot see its version)

    def answer(self, question: str) -> RAGResult:
        """Answer ``question``; with ``cache.answers`` a repeat of an earlier question over the same
        collection version, artifact and settings is served from the answer cache (0 LM calls)."""
        cache, key = self._cache(question)
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                return hit
        result = self.program(question=question).result
        if cache is not None:
            cache.put(key, result)
        return result

    def _cache(self, question: str):
        if not self.settings.cache.answers or self.custom_retriever:
            return None, None
        from selfrag.answer_cache import CACHE_FILENAME, AnswerCache, CacheKey, fingerprint

        if getattr(self, "_answer_cache", None) is None:
            self._answer_cache = AnswerCache(Path(self.settings.kb.path).expanduser() / CACHE_FILENAME,
                                             max_entries=self.settings.cache.max_entries)
        s = self.settings
        web = s.web.model_dump(include={"backend", "max_results"} | ({"offline_collection"}
                                                                     if s.web.backend == "offline" else set()))
        shaping = {"program": s.program, "lm": s.lm.model_dump(exclude={"threads", "timeout", "model_cache"}),
                   "retrieval": s.retrieval, "web": web, "code": built_in_defaults()}
        artifact = fingerprint(self.artifact.read_bytes().hex()) if self.artifact is not None else ""
        version = self.kb.fingerprint()
        if s.retrieval.index != "none":  # an index rebuilt over the same chunks changes the answers too
            from selfrag.kb.indexes import index_fingerprint

            version += "|" + index_fingerprint(self.kb, s.retrieval.index)
        if others := other_collections_read(s, self.kb):
            version += "|" + fingerprint(others)  # hashed: descriptions are stored in no cache column
        return self._answer_cache, CacheKey(question, version, artifact, fingerprint(shaping))


def built_in_defaults() -> dict[str, Any]:
    """What answers depend on besides the settings, the artifact and the collections: the package version and
    the decision thresholds built into the code (an upgrade that moves them must not serve cached answers)."""
    from programs.thresholds import CRAG_DEFAULTS_BY_LANGUAGE, CragThresholds, Thresholds
    from selfrag import __version__

    return {"version": __version__, "thresholds": Thresholds().model_dump(), "crag": CragThresholds().model_dump(),
            "crag_by_language": {k: v.model_dump() for k, v in CRAG_DEFAULTS_BY_LANGUAGE.items()}}


def other_collections_read(settings: Settings, kb: KnowledgeBase) -> list[list[str]]:
    """``[name, description, version]`` of each collection besides ``kb`` whose content the program's answers
    depend on: with ``program.route_collections`` every described one (and ``kb``'s description, which the
    router reads too), with the offline web its collection. None is created."""
    from selfrag.kb.collection_info import list_described
    from selfrag.kb.store import collection_version

    from selfrag.kb.indexes import INDEX_SUFFIXES

    client = kb.store.client
    out: list[list[str]] = []
    if settings.program.route_collections:
        index = settings.retrieval.index
        for c in list_described(client):
            if not (c.description or c.name == kb.name):
                continue
            version = "" if c.name == kb.name else collection_version(client, c.name)
            if index != "none" and c.name != kb.name:  # searched through its index: a rebuilt index changes answers
                version += "/" + collection_version(client, f"{c.name}.{INDEX_SUFFIXES[index]}")
            out.append([c.name, c.description, version])
    if settings.web.backend == "offline":
        name = settings.web.offline_collection
        out.append([name, "", collection_version(client, name)])
    return out


def build_runtime(settings: Settings, *, retriever: Any = None, lms: tuple | None = None,
                  load_default_artifact: bool = True, progress: bool = False, demo: bool | None = None,
                  strict: bool = False) -> Runtime:
    """Build knowledge base, LMs, web search and the program registered as
    ``settings.program.strategy`` over :func:`build_retriever` (the chunks, or the index in
    ``retrieval.index``; for a ``StrategyRetrieval`` program also the other described collections and
    the metadata schema its strategies need, and ``lm.logprobs``: its rerank ``judge`` / ``auto`` then
    scores with its own relevance judgement), and load the compiled artifact (``settings.program_path``; else, for
    ``selfrag``, the shipped default if present).

    Everything that can be refused is checked before any store is written: the settings (already
    resolved), the model files (building the LMs), the artifact (loaded into the program, ``strict``:
    a content-hash mismatch is refused instead of warned about). Only then is the demo corpus ingested
    into an empty knowledge base — when ``demo`` is True, or (None, the default) when it is the default
    collection at the default path — and the web search built (the offline web fills its collection).
    A strategy program whose components read that collection (``self_query``, ``route_collections``) is
    checked over stand-ins before the ingest and given the components read after it."""
    from programs.artifacts import load_state_into
    from programs.registry import program_class
    from programs.strategy_retrieval import StrategyRetrieval
    from programs.types import WebSearch
    from selfrag.kb.factory import has_chunks, is_default_knowledge_base
    from selfrag.kb.strategy_components import reads_collection, standin_components, strategy_settings_set

    settings = with_artifact_program(settings)
    kb = build_knowledge_base(settings)  # no collection is opened yet
    retriever_was_given = retriever is not None
    cls = program_class(settings.program.strategy)
    fill_demo = not retriever_was_given and (is_default_knowledge_base(settings.kb) if demo is None else demo)
    base = retriever if retriever_was_given else build_retriever(settings, kb)
    components: dict[str, Any] = {"retriever": base}
    # A strategy program's components are read from the collection (metadata keys, descriptions); when the
    # demo corpus is about to fill it, the program and its artifact are checked over stand-ins of the same
    # shape, and it gets the real components once the corpus is in.
    pending = False
    if issubclass(cls, StrategyRetrieval):
        if not retriever_was_given:
            pending = fill_demo and reads_collection(settings.program) and not has_chunks(settings.kb)
            components = (standin_components(kb, settings.program, base) if pending
                          else strategy_components(settings, kb, base))
        components["logprobs"] = settings.lm.logprobs  # rerank judge / auto: the program's own relevance judgement
    elif unused := strategy_settings_set(settings.program):
        logger.warning("%s: only the strategy programs (iterative, decompose-serial) retrieve with them; "
                       "program.strategy = %r ignores them", ", ".join(unused), settings.program.strategy)
    generator, critic, adapter = lms if lms is not None else build_lms(settings)
    try:
        program = cls(**components, web_search=None, config=settings.program, generator_lm=generator,
                      critic_lm=critic, adapter=adapter)
    except (TypeError, ValueError) as exc:
        if retriever_was_given:
            raise
        from selfrag.errors import ConfigError

        raise ConfigError(f"program settings: {exc}") from None
    artifact = settings.program_path
    shipped = paths.default_artifact()
    if artifact is None and load_default_artifact and settings.program.strategy == "selfrag" and shipped.is_file():
        artifact = shipped  # compiled for SelfRAG only
    if artifact is not None:
        load_state_into(program, Path(artifact), strict=strict)
    try:  # CRAG: a threshold set in the settings against the other one the artifact (or the default) holds
        getattr(program, "check_crag_settings", lambda: None)()
    except ValueError as exc:
        from selfrag.errors import ConfigError

        raise ConfigError(f"program settings: {exc}") from None
    ingested = ensure_demo_corpus(kb, progress=progress) if fill_demo else False
    if pending:
        real = strategy_components(settings, kb, base)
        schema = real.get("metadata_schema")
        program.retriever, program.metadata_schema = real["retriever"], dict(schema) if schema else None
    web = build_web(settings)
    if web is not None and not isinstance(web, WebSearch):
        raise TypeError(f"web_search must implement search(query, max_results); got {type(web).__name__}")
    program.web_search = web  # built last: the offline web writes its own collection
    return Runtime(settings=settings, kb=kb, program=program, ingested_demo=ingested,
                   artifact=Path(artifact) if artifact is not None else None, custom_retriever=retriever_was_given)


def with_artifact_program(settings: Settings) -> Settings:
    """``settings`` with ``program.strategy`` set to the program ``settings.program_path`` was compiled for
    (its header names it), when no flag, env or TOML set the strategy: ``serve --program iterative.json``
    builds the iterative program. A strategy that was set is kept (a mismatch is the artifact check's
    one-line error); a missing or unreadable artifact is left to that check too."""
    from programs.artifacts import artifact_program

    path = settings.program_path
    if path is None or "strategy" in settings.program.model_fields_set or not Path(path).is_file():
        return settings
    named = artifact_program(path)
    if named == settings.program.strategy:
        return settings
    return settings.model_copy(update={"program": settings.program.model_copy(update={"strategy": named})})


def load_compiled(path: Path | str, settings: Settings | None = None) -> RAGModule:
    """One line from an artifact to a ready program: ``rag = load_compiled("artifacts/default.json")``.

    The program is the one the artifact was compiled for (its header names it: a CRAG artifact loads
    as ``CorrectiveRAG``). ``settings`` defaults to the resolved env/TOML settings. The artifact is
    checked before any model or store is touched.
    """
    from programs.artifacts import artifact_program
    from selfrag.settings import resolve

    strategy = artifact_program(path)
    settings = settings or resolve()
    program = settings.program.model_copy(update={"strategy": strategy})
    return build_runtime(settings.model_copy(update={"program_path": Path(path), "program": program})).program
