"""Shared by the judgement benches: the model flags and the SelfRAG program whose judges they score.

The program is built as ``selfrag ask`` builds it (settings → LMs → ``SelfRAG``, the artifact's state
loaded) over a retriever that returns nothing: these benches call the judges directly.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_model_args(ap: argparse.ArgumentParser) -> None:
    from selfrag import paths

    ap.add_argument("--profile", default="local")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--program", default=str(paths.default_artifact()),
                    help="compiled artifact whose judges are scored ('' = uncompiled)")


class NoRetriever:
    def retrieve(self, query: str, k: int = 5, filters: Any = None) -> list:
        return []


def judge_program(args: argparse.Namespace) -> Any:
    """The SelfRAG program of ``args`` (profile, threads, program), offline."""
    from selfrag.paths import offline_environment

    offline_environment()
    from programs.artifacts import load_state_into
    from programs.selfrag import SelfRAG
    from selfrag import wiring
    from selfrag.settings import resolve

    settings = resolve({"lm": {"profile": args.profile, "threads": args.threads}})
    generator, critic, adapter = wiring.build_lms(settings)
    program = SelfRAG(NoRetriever(), config=settings.program, generator_lm=generator, critic_lm=critic,
                      adapter=adapter)
    if args.program:
        load_state_into(program, args.program)
    return program
