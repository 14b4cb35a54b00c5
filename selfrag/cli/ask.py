"""``selfrag ask``: answer one question with its citations and a readable trace."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from selfrag.cli.common import (CollectionOpt, ConfigOpt, ModelOpt, ProfileOpt, ThreadsOpt, console, err_console, fail,
                                decoded, plain, quiet_libraries, settings_from, stdout_to_stderr)

if TYPE_CHECKING:  # pragma: no cover
    from programs.types import RAGResult


def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the full result (answer, citations, trace) as JSON.")] = False,
    program: Annotated[Optional[Path], typer.Option(
        "--program", help="Compiled artifact to load (JSON); answers as the program it was compiled for, "
                          "unless --strategy.")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Refuse an artifact whose content does not match its recorded hash.")] = False,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    strategy: Annotated[Optional[str], typer.Option(
        "--strategy", help="A registered program: selfrag | crag | iterative | decompose-serial | vanilla-rag | "
                           "graded-rag | no-retrieval.")] = None,
    mode: Annotated[Optional[str], typer.Option("--retrieve", help="Retrieval decision: adaptive | always | never.")] = None,
    web: Annotated[Optional[str], typer.Option("--web", help="Web fallback: none | tavily | offline.")] = None,
    collection: CollectionOpt = None,
    threads: ThreadsOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No spinner or progress bars.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Answer QUESTION from the knowledge base (the default one gets the bundled demo corpus when empty).

    Exits 1 when the LM calls that decide the answer failed (backend unreachable, key refused, prompt
    too long, timeouts): the cause is printed, and ``--json`` still prints the result with its ``error``."""
    question = decoded(question)
    if not question.strip():
        fail("the question is empty", 2)
    settings = settings_from(config, {
        "lm": {"profile": profile, "model": model, "threads": threads},
        "program": {"retrieve_mode": mode, "strategy": strategy},
        "web": {"backend": web},
        "kb": {"collection": collection},
        "program_path": program,
    })
    limit = settings.program.max_question_chars
    if len(question.strip()) > limit:
        fail(f"the question is {len(question.strip())} characters long; the limit is {limit} "
             "(program.max_question_chars)", 2)
    from selfrag.kb.factory import is_default_knowledge_base, require_collection
    from selfrag.wiring import build_runtime

    demo = is_default_knowledge_base(settings.kb)
    if not demo and require_collection(settings.kb) == 0:
        err_console.print(plain(f"warning: collection {settings.kb.collection!r} is empty; "
                                "ingest documents with `selfrag ingest PATH`", "yellow"), soft_wrap=True)
    if quiet:
        quiet_libraries()
    status = err_console.status("Loading knowledge base and model…", spinner="dots") if not quiet \
        else contextlib.nullcontext()
    with stdout_to_stderr(), status as spinner:
        runtime = build_runtime(settings, progress=False, demo=demo, strict=strict)
        if runtime.ingested_demo:
            err_console.print(plain(f"Knowledge base was empty: ingested the demo corpus into "
                                    f"{settings.kb.collection!r} ({runtime.kb.count()} chunks)."), soft_wrap=True)
        if spinner is not None:
            spinner.update("Thinking: retrieve, grade, draft, critique…")
        result: RAGResult = runtime.answer(question)

    if as_json:
        typer.echo(_json(result))
    else:
        render(result)
    if result.error:
        fail(f"no answer: {result.error}", 1)


def _json(result: RAGResult) -> str:
    payload = result.model_dump(mode="json")
    try:
        text = json.dumps(payload, ensure_ascii=False, indent=2)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:  # lone surrogates (an undecodable file name): escape them
        return json.dumps(payload, ensure_ascii=True, indent=2)


# What `ask` prints around the answer, for a Chinese question (programs.language.question_language).
LABELS_ZH = {"Answer": "回答", "Citations": "引用", "Trace": "推理轨迹", "source": "来源", "snippet": "摘录",
             "abstained": "未作答", "no answer": "无答案", "web": "网络", "support": "支持度",
             "not supported by its sources": "来源不支持该回答",
             "stated in its sources (answer check)": "来源明确给出答案（答案检查）", "confidence": "置信度", "usefulness": "有用性",
             "LM failure": "模型调用失败", "LM calls": "次模型调用", "prompt": "提示", "completion": "生成",
             "tokens": "词元", "from cache": "来自缓存"}


def label(text: str, language: str) -> str:
    return LABELS_ZH.get(text, text) if language == "zh" else text


def _flags(result: RAGResult, language: str = "en") -> Text:
    flags = Text()
    t = lambda text: label(text, language)  # noqa: E731

    def add(text: str, style: str = "") -> None:
        if flags:
            flags.append(" · ")
        flags.append(text, style=style)

    if result.abstained:
        add(f"{t('abstained')}: {result.abstain_reason or t('no answer')}", "yellow")
    if result.used_web:
        add(t("web"), "cyan")
    if result.supported == "no":
        add(t("not supported by its sources"), "red")
    elif result.supported:
        add(f"{t('support')}: {result.supported}")
    elif not result.abstained and any(s.step == "support_verified" for s in result.trace):
        add(t("stated in its sources (answer check)"))
    if result.confidence is not None:
        add(f"{t('confidence')}: {result.confidence:.2f}")
    if result.usefulness is not None:
        add(f"{t('usefulness')}: {result.usefulness}/5")
    return flags


def render(result: RAGResult) -> None:
    """The answer, its citations and the trace. Every value is shown as plain text (documents, answers
    and sources may contain rich markup such as ``[/b]``: it is never interpreted). Labels and the
    abstain reason are in Chinese for a Chinese question."""
    from programs.language import ABSTAIN_REASONS_ZH, question_language
    from programs.thresholds import ABSTAIN_REASONS

    language = question_language(result.question)
    t = lambda text: label(text, language)  # noqa: E731
    flags = _flags(result, language)
    console.print(Panel(plain(result.answer), title=t("Answer"), subtitle=flags if flags else None, expand=False))
    if result.abstained and result.abstain_reason:
        reasons = ABSTAIN_REASONS_ZH if language == "zh" else ABSTAIN_REASONS
        console.print(Text(reasons.get(result.abstain_reason, ""), style="dim"))
    if result.error:
        console.print(plain(f"{t('LM failure')}: {result.error}", "bold red"), soft_wrap=True)
    if result.citations:
        table = Table(title=t("Citations"), show_lines=False)
        for col in ("#", t("source"), t("snippet")):
            table.add_column(col)
        for i, c in enumerate(result.citations, 1):
            table.add_row(str(i), plain(c.source or c.id), plain(c.snippet[:100] + ("…" if len(c.snippet) > 100 else "")))
        console.print(table)
    trace = Table(title=t("Trace"))
    for col in ("step", "inputs", "output", "P", "ok", "s", "LM", "tokens"):
        trace.add_column(col, overflow="fold", no_wrap=col == "step")
    for s in result.trace:
        inputs = ", ".join(f"{k}={v[:40]}" for k, v in s.inputs.items())
        out = s.error if not s.ok else json.dumps(s.output, ensure_ascii=False)[:60]
        probs = "" if not s.probs else " ".join(f"{k}:{v:.2f}" for k, v in s.probs.items() if v >= 0.005)
        probs += "" if s.soft is not False else " (hard)"
        tokens = f"{s.prompt_tokens}+{s.completion_tokens}" if s.lm_calls else ""
        trace.add_row(plain(s.step), plain(inputs[:70]), plain(out or ""), plain(probs), "✓" if s.ok else "✗",
                      f"{s.seconds:.2f}", str(s.lm_calls), tokens)
    console.print(trace)
    u = result.usage
    cached = f" ({u.cached_tokens} {t('from cache')})" if u.cached_tokens else ""
    console.print(Text(f"{u.lm_calls} {t('LM calls')} · {u.prompt_tokens} {t('prompt')}{cached} + "
                       f"{u.completion_tokens} {t('completion')} {t('tokens')} · {result.seconds:.1f} s"))


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)
