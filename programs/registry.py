"""The one registry of programs: a name (``ask --strategy``, ``eval --programs``, ``program.strategy``)
→ its class, plus ``compiled:PATH`` for a compiled artifact of a registered program.

Classes are named as ``module:Class`` and imported on first use, so the settings can validate a name
without importing DSPy modules. Add a program here and every entry point knows it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from programs.base import RAGModule

_PROGRAMS: dict[str, str] = {
    "selfrag": "programs.selfrag:SelfRAG",
    "crag": "programs.crag:CorrectiveRAG",
    "vanilla-rag": "programs.baselines:VanillaRAG",
    "no-retrieval": "programs.baselines:NoRetrieval",
    "graded-rag": "programs.baselines:GradedRAG",
    "iterative": "programs.iterative:IterativeRAG",
    "decompose-serial": "programs.decomposed:SerialDecomposition",
}

PROGRAM_NAMES: tuple[str, ...] = tuple(_PROGRAMS)
COMPILED_PREFIX = "compiled:"


def program_class(name: str) -> type[RAGModule]:
    """The class registered under ``name``; ValueError naming the choices for an unknown one."""
    try:
        target = _PROGRAMS[name]
    except KeyError:
        raise ValueError(f"unknown program {name!r}; choose one of: {', '.join(PROGRAM_NAMES)} "
                         f"or {COMPILED_PREFIX}PATH") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


def program_name(cls: type | str) -> str:
    """The registry name of a program class, or of a class name as an artifact header records it
    (``"CorrectiveRAG"`` → ``"crag"``); ValueError if it is not registered."""
    wanted = (None, cls) if isinstance(cls, str) else (cls.__module__, cls.__name__)
    for name, target in _PROGRAMS.items():
        module, attr = target.split(":")
        if (wanted[0] in (None, module)) and wanted[1] == attr:
            return name
    raise ValueError(f"{wanted[1]} is not a registered program")


@dataclass(frozen=True)
class ProgramSpec:
    """One entry of a program list: a registered name, or a compiled artifact (``compiled:PATH``)."""

    label: str
    name: str
    artifact: Path | None = None

    @property
    def cls(self) -> type[RAGModule]:
        """The registered class; for a compiled artifact, the program its header names (a ``compile
        --program iterative`` artifact is an ``IterativeRAG``); ArtifactError for an unusable artifact."""
        if self.artifact is not None:
            from programs.artifacts import artifact_program  # it imports this module

            return program_class(artifact_program(self.artifact))
        return program_class(self.name)


def parse_program(text: str, default_compiled: str = "selfrag") -> ProgramSpec:
    """``selfrag`` → the class; ``compiled:PATH`` → that artifact, whose class is the one its header
    names (read when it is built, :attr:`ProgramSpec.cls`; ``name`` is ``default_compiled``). Raises
    ValueError for an unknown name."""
    text = text.strip()
    if text.startswith(COMPILED_PREFIX):
        path = text[len(COMPILED_PREFIX):].strip()
        if not path:
            raise ValueError(f"{text!r}: {COMPILED_PREFIX} needs a path, e.g. compiled:artifacts/default.json")
        return ProgramSpec(label=text, name=default_compiled, artifact=Path(path))
    program_class(text)  # validates
    return ProgramSpec(label=text, name=text)


def parse_programs(text: str) -> list[ProgramSpec]:
    """A comma-separated program list (``selfrag,compiled:artifacts/default.json,vanilla-rag``),
    validated, duplicates dropped (first kept)."""
    labels = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not labels:
        raise ValueError("no programs given")
    return [parse_program(label) for label in labels]
