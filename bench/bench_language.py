"""Do the program's writing steps keep the language of a Chinese question? The artifact's instructions
against the signatures' current docstrings, same model, same questions, one run.

    .venv/bin/python bench/bench_language.py [--profile local] [--program artifacts/default.json] [--limit N]

``answer_directly`` answers the Chinese no-retrieval questions of the retrieve splits (train + dev; a
translation request is left out: it asks for another language); ``rewrite_query`` rewrites the first
``--limit`` Chinese QA dev questions (the question itself as the failed query); as a control,
``answer_directly`` also answers ``--limit`` English no-retrieval questions. An output is in the
question's language when :func:`programs.language.question_language` classes it so. Prints one table:
predictor, questions' language, instructions (artifact | signature), outputs, share in the question's
language, LM calls, prompt tokens.
An artifact stores each predictor's instructions, so a docstring change reaches a compiled program only at
its next compile; this bench says whether the change is worth one.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from rich.console import Console
from rich.table import Table

TRANSLATION_REQUEST = re.compile(r"翻译|translate", re.IGNORECASE)
# A letter of any script: text with none (digits, signs) is in no language in particular.
LETTER = re.compile(r"[^\W\d_]")


def no_retrieval_questions(task: str, splits_dir: Any) -> list[str]:
    """The questions labelled no-retrieval in ``task``'s train + dev splits, translation requests left out."""
    from optimize.splits import load_split

    out = []
    for split in ("train", "dev"):
        out += [ex.question for ex in load_split(task, split, splits_dir)
                if ex.decision == "no" and not TRANSLATION_REQUEST.search(ex.question)]
    return out


def share_in_language(outputs: list[str | None], language: str) -> float:
    """Share of ``outputs`` in ``language``: classed so, or in no language (digits and signs only: "47" answers
    a Chinese question as well as an English one). A failed call, None, counts as not."""
    from programs.language import question_language

    def right(text: str | None) -> bool:
        if not text:
            return False
        return question_language(text) == language or not LETTER.search(text)

    return sum(1 for o in outputs if right(o)) / len(outputs) if outputs else 0.0


def run(program: Any, name: str, predictor: Any, calls: list[dict[str, Any]],
        output: str) -> tuple[list[str | None], int, int]:
    """Call ``predictor`` as the program calls its generator steps (its LM and adapter, a traced call; a
    failed call gives None): the outputs, LM calls and prompt tokens."""
    from programs.tracing import Tracer

    tracer = Tracer()
    outputs: list[str | None] = []
    for kwargs in calls:
        bounded = program._bounded(predictor, kwargs["question"], output)  # as the program calls it
        pred, _ = program._generator(tracer, name, bounded, output, **kwargs)
        value = None if pred is None else getattr(pred, output, None)
        outputs.append(value if isinstance(value, str) else None)
    return outputs, tracer.usage.lm_calls, tracer.usage.prompt_tokens


def with_instructions(predictor: Any, text: str) -> Any:
    clone = predictor.deepcopy()
    clone.signature = clone.signature.with_instructions(text)
    return clone


def main() -> None:
    from judge_program import add_model_args, judge_program

    ap = argparse.ArgumentParser()
    add_model_args(ap)
    ap.add_argument("--limit", type=int, default=10, help="Chinese QA dev questions to rewrite; English no-retrieval questions to answer")
    ap.add_argument("--show", action="store_true", help="print every output")
    args = ap.parse_args()
    program = judge_program(args)
    from optimize.splits import load_split
    from selfrag import paths

    splits = paths.splits_dir()
    direct = [{"question": q} for q in no_retrieval_questions("retrieve_zh", splits)]
    control = [{"question": q} for q in no_retrieval_questions("retrieve", splits)[: args.limit]]
    rewrite = [{"question": ex.question, "failed_queries": [ex.question]}
               for ex in load_split("qa_zh", "dev", splits)[: args.limit]]
    cases: list[tuple[str, list[dict[str, Any]], str, str]] = [
        ("answer_directly", direct, "answer", "zh"), ("rewrite_query", rewrite, "query", "zh"),
        ("answer_directly", control, "answer", "en")]
    table = Table(title=f"writing steps in the question's language ({args.profile}; artifact {args.program or 'none'})")
    for col in ("predictor", "questions", "instructions", "outputs", "in the question's language", "LM calls",
                "prompt tokens"):
        table.add_column(col, justify="right")
    for name, calls, output, language in cases:
        predictor = getattr(program, name)
        variants = [("artifact", predictor),
                    ("signature", with_instructions(predictor, program.PREDICTORS[name].instructions))]
        for label, variant in variants:
            outputs, n_calls, tokens = run(program, name, variant, calls, output)
            table.add_row(name, language, label, str(len(outputs)), f"{share_in_language(outputs, language):.2f}",
                          str(n_calls), str(tokens))
            if args.show:
                for kwargs, out in zip(calls, outputs):
                    print(f"{name}/{label}: {kwargs['question']} -> {out!r}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
