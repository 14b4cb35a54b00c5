"""Measure an in-process LM backend: assembly, load, prompt/generation speed, judgement sanity, prefix cache.

    .venv/bin/python bench/bench_lm.py --profile local --threads 2          # full run (~3-5 min on 2 cores)
    .venv/bin/python bench/bench_lm.py --profile tiny --threads 1 --assemble # quick smoke

Prints one table. ``--assemble`` also times a fresh assembly of the local model into a temporary
directory (needs ~1 GB of free disk, deleted afterwards).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Literal

from selfrag.paths import offline_environment

logger = logging.getLogger("bench_lm")


def probe_signatures():
    """The two judgement probes' signatures (dspy is imported once the offline environment is set)."""
    import dspy

    class Relevance(dspy.Signature):
        """Decide whether the passage contains information that helps answer the question."""

        question: str = dspy.InputField()
        passage: str = dspy.InputField()
        label: Literal["relevant", "irrelevant"] = dspy.OutputField()

    class Support(dspy.Signature):
        """Decide how far the passage supports the answer: fully, partially, or not at all."""

        question: str = dspy.InputField()
        answer: str = dspy.InputField()
        passage: str = dspy.InputField()
        support: Literal["fully", "partially", "no"] = dspy.OutputField()

    return Relevance, Support


RELEVANCE_PROBES = [
    ("What is the capital of France?", "Paris is the capital and most populous city of France.", "relevant"),
    (
        "When did World War II end?",
        "World War II ended in 1945 with the surrender of Germany in May and Japan in September.",
        "relevant",
    ),
    (
        "How many legs does a spider have?",
        "Spiders are arachnids with eight legs and two body segments.",
        "relevant",
    ),
    (
        "What does the Python function len() return?",
        "len(s) returns the number of items in a container such as a list or string.",
        "relevant",
    ),
    ("Who wrote Pride and Prejudice?", "Pride and Prejudice is an 1813 novel by Jane Austen.", "relevant"),
    (
        "What is the capital of France?",
        "The mitochondrion is an organelle that produces most of the cell's ATP.",
        "irrelevant",
    ),
    (
        "How do I sort a list in Python?",
        "The Great Barrier Reef is the world's largest coral reef system, off Queensland.",
        "irrelevant",
    ),
    (
        "What is the boiling point of water?",
        "Basketball was invented by James Naismith in 1891 in Springfield, Massachusetts.",
        "irrelevant",
    ),
    (
        "Who painted the Mona Lisa?",
        "The stock market fell sharply on Monday after interest rates rose.",
        "irrelevant",
    ),
    (
        "What is photosynthesis?",
        "Rust is a systems programming language focused on memory safety.",
        "irrelevant",
    ),
]

SUPPORT_PROBES = [
    (
        "What is the capital of France?",
        "Paris.",
        "Paris is the capital and most populous city of France.",
        "fully",
    ),
    (
        "When did World War II end?",
        "It ended in 1945.",
        "World War II ended in 1945 with the surrender of Japan.",
        "fully",
    ),
    (
        "Who wrote Pride and Prejudice?",
        "Jane Austen wrote it.",
        "Pride and Prejudice is an 1813 novel by Jane Austen.",
        "fully",
    ),
    ("How many legs does a spider have?", "Eight.", "Spiders are arachnids with eight legs.", "fully"),
    (
        "What does len() return?",
        "The number of items in a container.",
        "len(s) returns the number of items in a container.",
        "fully",
    ),
    ("What is the capital of France?", "Berlin.", "Paris is the capital of France.", "no"),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci.", "The stock market fell sharply on Monday.", "no"),
    (
        "When was the Eiffel Tower built?",
        "In 1889, for the World's Fair, by Gustave Eiffel's company.",
        "The Eiffel Tower is a wrought-iron tower in Paris.",
        "partially",
    ),
    (
        "How tall is Mount Everest?",
        "About 8,849 metres.",
        "Mount Everest is the highest mountain on Earth, in the Himalayas.",
        "partially",
    ),
    (
        "What is the boiling point of water at sea level?",
        "100 degrees Celsius.",
        "Basketball was invented in 1891.",
        "no",
    ),
]

LONG_PROMPT = "Summarise the following notes in two sentences.\n\n" + "\n".join(
    f"Note {i}: The retrieval system splits documents into chunks of about eight hundred characters, "
    f"embeds each chunk, and stores the vectors with their source metadata for later search."
    for i in range(1, 19)
)


def _engine_call(lm, fn):
    """Run ``fn`` and return (result, CallStats of the engine's last call)."""
    result = fn()
    return result, lm.engine.last


def bench(args: argparse.Namespace) -> list[tuple[str, str]]:
    import dspy

    from selfrag.lm import model_files
    from selfrag.lm.factory import build_adapter, build_lm
    from selfrag.settings import LMSettings

    Relevance, Support = probe_signatures()
    rows: list[tuple[str, str]] = []
    settings = LMSettings(
        profile=args.profile,
        threads=args.threads,
        n_ctx=args.n_ctx,
        max_tokens=args.max_tokens,
        model=args.model,
        timeout=600,
        ram_cache_mb=args.ram_cache_mb,
    )

    if args.assemble and args.profile == "local" and not args.model:
        tmp = Path(tempfile.mkdtemp(prefix="selfrag-assemble-"))
        try:
            t = time.perf_counter()
            model_files.assemble_parts(
                model_files.locate_qwen_parts(), tmp / model_files.QWEN_FILENAME, model_files.QWEN_SHA256
            )
            rows.append(("assembly (fresh, 22 parts + sha256)", f"{time.perf_counter() - t:.1f} s"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    t = time.perf_counter()
    lm = build_lm(settings)
    rows.append(("locate model (cached, marker check)", f"{(time.perf_counter() - t) * 1000:.1f} ms"))
    engine = lm.engine
    size = Path(engine.model_path).stat().st_size / 2**20
    rows.append(("model file", f"{Path(engine.model_path).name} ({size:.0f} MiB)"))
    rows.append(("threads / n_ctx", f"{engine.n_threads} / {engine.n_ctx}"))

    t = time.perf_counter()
    model = engine.model()
    rows.append(("load", f"{time.perf_counter() - t:.2f} s"))

    # Warm-up: with mmap the first evaluation pages the weights in; keep it out of the speed figures.
    t = time.perf_counter()
    lm("Hi", max_tokens=1)
    rows.append(("first call (warm-up, pages weights in)", f"{time.perf_counter() - t:.2f} s"))

    # Speed: a fresh ~700-token prompt, free-text generation of up to 64 tokens.
    model.llama.reset()
    _, s = _engine_call(lm, lambda: lm(LONG_PROMPT, max_tokens=64))
    rows.append(
        (
            "prompt eval",
            f"{s.prompt_evaluated} tok in {s.prompt_seconds:.2f} s = "
            f"{s.prompt_evaluated / s.prompt_seconds:.1f} tok/s",
        )
    )
    rows.append(
        (
            "generation",
            f"{s.completion_tokens} tok in {s.generation_seconds:.2f} s = "
            f"{s.completion_tokens / s.generation_seconds:.1f} tok/s",
        )
    )

    adapter = build_adapter(settings)
    with dspy.context(lm=lm, adapter=adapter):
        # Prompt reuse: the same workloads with no reuse (KV reset before each call), with llama.cpp's
        # KV prefix reuse only, and with the prompt-state RAM cache on top.
        saved_cache = model.llama.cache
        workloads = {
            "5 relevance calls": [
                (Relevance, {"question": q, "passage": p}) for q, p, _ in RELEVANCE_PROBES[:5]
            ],
            "3x relevance/support alternating": [
                call
                for i in range(3)
                for call in (
                    (Relevance, {"question": RELEVANCE_PROBES[i][0], "passage": RELEVANCE_PROBES[i][1]}),
                    (
                        Support,
                        dict(zip(("question", "answer", "passage"), SUPPORT_PROBES[i][:3], strict=True)),
                    ),
                )
            ],
        }
        for name, calls in workloads.items():
            walls = {}
            for mode in ("no reuse", "KV prefix", "KV prefix + RAM cache"):
                model.llama.reset()
                model.llama.set_cache(
                    _fresh_ram_cache(args.ram_cache_mb) if mode.endswith("RAM cache") else None
                )
                before = _snapshot(engine)
                t = time.perf_counter()
                for signature, inputs in calls:
                    if mode == "no reuse":
                        model.llama.reset()
                    dspy.Predict(signature)(**inputs)
                walls[mode] = wall = time.perf_counter() - t
                d = {key: value - before[key] for key, value in _snapshot(engine).items()}
                rows.append(
                    (
                        f"{name}: {mode}",
                        f"{d['prompt_evaluated']}/{d['prompt_tokens']} prompt tok evaluated, "
                        f"prompt {d['prompt_seconds']:.1f} s, wall {wall:.1f} s",
                    )
                )
            base = walls["no reuse"]
            rows.append(
                (
                    f"{name}: saving",
                    ", ".join(
                        f"{mode} {base - w:.1f} s ({(1 - w / base) * 100:.0f}%)"
                        for mode, w in walls.items()
                        if mode != "no reuse"
                    ),
                )
            )
        model.llama.set_cache(saved_cache)

        if not args.skip_probes:
            rows += _probes(
                engine,
                "relevance",
                Relevance,
                RELEVANCE_PROBES,
                "label",
                lambda q, p, _e: {"question": q, "passage": p},
            )
            rows += _probes(
                engine,
                "support",
                Support,
                SUPPORT_PROBES,
                "support",
                lambda q, a, p, _e: {"question": q, "answer": a, "passage": p},
            )
    st = engine.stats
    rows.append(
        (
            "engine totals",
            f"{st.calls} calls, {st.failures} failures, prompt {st.prompt_evaluated}/"
            f"{st.prompt_tokens} tok evaluated, {st.completion_tokens} completion tok, "
            f"{st.total_seconds:.1f} s",
        )
    )
    return rows


def _fresh_ram_cache(mb: int):
    from llama_cpp import LlamaRAMCache

    return LlamaRAMCache(capacity_bytes=mb << 20)


def _snapshot(engine) -> dict[str, float]:
    st = engine.stats
    return {
        "prompt_tokens": st.prompt_tokens,
        "prompt_evaluated": st.prompt_evaluated,
        "prompt_seconds": st.prompt_seconds,
        "calls": st.calls,
    }


def _probes(engine, name, signature, probes, field, to_inputs) -> list[tuple[str, str]]:
    import dspy

    correct, failures, details = 0, 0, []
    t = time.perf_counter()
    for probe in probes:
        expected = probe[-1]
        try:
            got = getattr(dspy.Predict(signature)(**to_inputs(*probe)), field)
        except Exception as exc:  # noqa: BLE001 - a bench records failures and carries on
            failures += 1
            got = f"ERROR {type(exc).__name__}"
        correct += got == expected
        details.append(f"{expected[:4]}->{str(got)[:4]}")
    seconds = time.perf_counter() - t
    return [
        (
            f"{name} probes ({len(probes)})",
            f"{correct}/{len(probes)} correct, {failures} failed, {seconds / len(probes):.2f} s/call",
        ),
        (f"{name} detail", " ".join(details)),
    ]


def main() -> None:
    offline_environment()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", choices=["local", "tiny"], default="local")
    parser.add_argument("--model", default=None, help="a .gguf path overriding the profile's model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--ram-cache-mb", type=int, default=512)
    parser.add_argument(
        "--assemble", action="store_true", help="also time a fresh assembly of the local model"
    )
    parser.add_argument("--skip-probes", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    rows = bench(args)
    width = max(len(k) for k, _ in rows)
    print(f"\nbench_lm: profile={args.profile} threads={args.threads} load avg={os.getloadavg()[0]:.2f}")
    print("-" * (width + 60))
    for key, value in rows:
        print(f"{key.ljust(width)} | {value}")


if __name__ == "__main__":
    main()
