"""What one service process serves: the wired program and the collections its retriever routes to.

:func:`build_service_runtime` wires it from resolved settings through :func:`selfrag.wiring.build_runtime`
(the same wiring as ``selfrag ask``); tests build a :class:`ServiceRuntime` directly around a program
over the scripted LM engine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from selfrag.service.knowledge import Collections

if TYPE_CHECKING:
    from selfrag.service.settings import ServiceSettings
    from selfrag.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class ServiceRuntime:
    """``program`` must retrieve through ``collections.retriever()`` for per-request collections."""

    program: Any
    collections: Collections
    model_id: str = "selfrag"
    model_ready: bool = True  # False until in-process weights are loaded (build_service_runtime)
    info: dict[str, Any] = field(default_factory=dict)

    def lms(self) -> list[Any]:
        seen = []
        for lm in (getattr(self.program, "generator_lm", None), getattr(self.program, "critic_lm", None)):
            if lm is not None and all(lm is not s for s in seen):
                seen.append(lm)
        return seen


def warm_up(runtime: ServiceRuntime) -> None:
    """Load in-process model weights now (at start-up), not on the first question."""
    runtime.model_ready = False
    for lm in runtime.lms():
        load = getattr(getattr(lm, "engine", None), "model", None)  # LlamaCppEngine.model() loads once per process
        if callable(load):
            load()
    runtime.model_ready = True


def build_service_runtime(settings: "Settings", service: "ServiceSettings",
                          strict: bool = False) -> ServiceRuntime:
    """Knowledge base, LMs, web and program from ``settings`` (``strict``: an artifact whose content does
    not match its recorded hash is refused, not warned about); the demo corpus when the default
    collection is empty (``service.demo_corpus``); model weights loaded. Each question and search
    retrieves from its collection through :func:`selfrag.wiring.build_retriever` (over
    ``retrieval.index`` when set); self-query reads that collection's metadata keys per question.
    ``program.route_collections`` is refused (:class:`~selfrag.errors.ConfigError`): a request names its
    collection."""
    from selfrag.errors import ConfigError
    from selfrag.wiring import build_retriever, build_runtime, ensure_demo_corpus, with_artifact_program

    settings = with_artifact_program(settings)  # the served program is the one its artifact was compiled for
    if settings.program.route_collections:  # a request names its collection: nothing to route
        raise ConfigError("program.route_collections is not served: each request answers from the collection "
                          "it names; route with `selfrag ask` or `selfrag eval`")
    collections = Collections(settings.kb, settings.retrieval,  # questions and /v1/search: retrieval.index too
                              retriever_of=lambda kb, mode=None: build_retriever(settings, kb, mode))
    runtime = build_runtime(settings, retriever=collections.retriever(), strict=strict)
    if service.demo_corpus:
        if ensure_demo_corpus(collections.get(create=True)):
            log.info("the default collection was empty: ingested the demo corpus")
    if settings.retrieval.index != "none":  # a missing index is refused at start-up, as ask refuses it
        build_retriever(settings, collections.get(create=True))
    served = ServiceRuntime(program=runtime.program, collections=collections,
                            model_id=f"selfrag-{settings.program.strategy}",
                            info={"profile": settings.lm.profile, "strategy": settings.program.strategy})
    warm_up(served)
    return served
