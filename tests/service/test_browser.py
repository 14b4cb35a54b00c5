"""The web page in a real browser: Debian's Chromium (/usr/bin/chromium) driven by Playwright, which
never downloads a browser of its own. Traffic goes to 127.0.0.1 only.

- Against the app under uvicorn with the scripted LM engine: steps appear while the program is held in
  its draft, the cited answer, a citation opened to its full passage, Stop cancelling the question, an
  upload asked about, and untrusted text rendered as text.
- Against a real ``selfrag serve`` subprocess with the tiny model (SmolLM2-135M in llama.cpp) and the
  real embedder: upload a file, ask about it, watch the steps stream in and the outcome. The tiny model
  judges at chance and (greedy) always declares its drafts unanswerable, so it abstains: the test checks
  the plumbing and that the uploaded passage is the one retrieved and graded, not a citation.

Screenshots land in the test's tmp directory; ``SELFRAG_SCREENSHOT=docs/serve.png`` copies the one of
the real-model run there.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest

from selfrag.service.process import ServeProcess
from tests.service.conftest import GOOD, Gate

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

OSPREY = ("The Osprey folding bike weighs 11 kg and folds in 10 seconds. "
          "Its frame is <b>not bold</b> aluminium.\n")

# Installed through the DevTools protocol (the page's CSP forbids eval, so no wait_for_function): logs
# when each timeline step appears and when the question is done, to show the steps came while it ran.
WATCH = """
window.__seen = [];
document.addEventListener("DOMContentLoaded", () => {
  const log = (what) => window.__seen.push([what, performance.now()]);
  new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach(() => log("step"))))
    .observe(document.getElementById("steps"), {childList: true});
  new MutationObserver(() => { if (document.getElementById("status").textContent === "done") log("done"); })
    .observe(document.getElementById("status"), {childList: true, characterData: true, subtree: true});
});
"""


@pytest.fixture
def page():
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: apt-get install -y chromium"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        context.add_init_script(WATCH)
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()


def submit(page, question: str) -> None:
    page.evaluate("() => { window.__seen = []; }")
    page.fill("#question", question)
    page.click("#ask-button")


def wait_done(page, timeout_ms: int) -> list[list]:
    page.wait_for_selector("#ask-button:not([disabled])", timeout=timeout_ms)
    error = page.text_content("#error")
    assert not error, error
    assert page.text_content("#status") == "done"
    return page.evaluate("() => window.__seen")


def steps_of(page) -> list[str]:
    return page.eval_on_selector_all("#steps li", "els => els.map(e => e.dataset.step)")


def upload(page, path: Path, collection: str) -> str:
    page.fill("#upload-collection", collection)
    page.set_input_files("#files", str(path))
    page.click("#upload-button")
    page.wait_for_selector("#upload-report:has-text('Ingested')", timeout=120_000)
    assert page.eval_on_selector("#collection", "s => s.value") == collection  # the picker follows
    return page.text_content("#upload-report")


def test_the_page_streams_cites_opens_passages_stops_and_uploads(live, page, tmp_path):
    gate = Gate(GOOD["generate_answer"])

    def draft(inputs):
        if "Osprey" in inputs["passages"]:
            return {"answer": "It weighs 11 kg.", "citations": [1], "answerable": True}
        return gate(inputs)

    def grade(inputs):
        hit = any(word in inputs["passage"] for word in ("Zephyr", "Osprey"))
        return {"relevance": "relevant" if hit else "irrelevant"}

    service, server = live(script=dict(GOOD, grade_relevance=grade, generate_answer=draft))
    page.goto(server.url + "/")
    page.wait_for_selector("#collection option", state="attached")  # the script ran under the page's CSP
    assert "docs (3 chunks)" in page.text_content("#collection")

    submit(page, "When did the Zephyr bridge open?")
    assert gate.reached.wait(20)  # the program is held in its draft: what is on screen came while it ran
    page.wait_for_selector("#steps li[data-step='grade_relevance']")
    assert steps_of(page)[:3] == ["retrieve_rule", "route", "retrieve"]
    assert page.text_content("#status") == "thinking" and page.is_visible("#live")
    assert "passage bridge: relevant" in page.text_content("#steps")
    gate.release.set()
    wait_done(page, 20_000)
    assert page.text_content("#answer") == "It opened in 1931."
    assert "support: fully" in page.text_content("#flags")
    assert page.text_content("#citations a") == "[1] Bridges"
    assert "LM calls" in page.text_content("#counters") and "completion tokens" in page.text_content("#usage")
    page.click("#citations a")
    page.wait_for_selector("#passage[open]")
    page.wait_for_selector("#passage-text:has-text('spans the river Oda')")
    assert page.text_content("#passage-title") == "Bridges"
    page.screenshot(path=str(tmp_path / "page-scripted.png"), full_page=True)
    page.click("#passage button")

    # Stop: the browser drops the stream and the program stops at its next step
    gate.reached.clear()
    gate.release.clear()
    before = len(service.engine.calls)
    submit(page, "When did the Zephyr bridge open?")
    assert gate.reached.wait(20)
    page.click("#stop-button")
    page.wait_for_selector("#status:text-is('stopped')")
    time.sleep(0.3)
    gate.release.set()
    deadline = time.time() + 10
    while service.app.state.service.runner.gate.depth and time.time() < deadline:
        time.sleep(0.05)
    assert "judge_support" not in service.engine.roles()[before:]

    doc = tmp_path / "osprey.txt"
    doc.write_text(OSPREY)
    assert "1 chunk(s) added" in upload(page, doc, "bikes")
    submit(page, "How much does the Osprey folding bike weigh?")
    wait_done(page, 20_000)
    assert page.text_content("#answer") == "It weighs 11 kg."
    assert page.text_content("#citations a") == "[1] osprey"
    assert "<b>not bold</b>" in page.text_content("#citations .snippet")  # untrusted text shows as text
    assert page.query_selector("#citations b") is None and page.query_selector("#passage-text b") is None


def test_enter_while_a_question_runs_starts_no_second_one_and_an_error_clears_thinking(live, page):
    from selfrag.service.settings import ServiceSettings

    gate = Gate(GOOD["generate_answer"])
    service, server = live(script=dict(GOOD, generate_answer=gate), settings=ServiceSettings(request_timeout=3.0))
    page.goto(server.url + "/")
    page.wait_for_selector("#collection option", state="attached")
    submit(page, "When did the Zephyr bridge open?")
    assert gate.reached.wait(20)
    page.wait_for_selector("#steps li[data-step='grade_relevance']")
    shown = steps_of(page)
    page.fill("#question", "A second question about glass recycling?")
    page.press("#question", "Enter")
    time.sleep(0.5)
    assert steps_of(page) == shown and service.app.state.service.runner.gate.depth == 1  # no second question
    # The held draft outlives the 3 s request timeout: the error shows, and "Thinking…" does not stay.
    page.wait_for_selector("#ask-button:not([disabled])", timeout=20_000)
    assert "timeout" in page.text_content("#error") and page.text_content("#answer") == ""
    gate.release.set()


CONFIG = """
[kb]
path = "{kb}"
[retrieval]
similarity_embedder = ""  # the collection's own scale: no gate for it, so the page shows the relevance grade
[lm]
profile = "tiny"
threads = 2
max_tokens = 96
[program]
retrieve_mode = "always"
k = 1
max_candidates = 1
max_rewrites = 0
max_regenerations = 0
max_web_rounds = 0
"""


@pytest.fixture
def served(tmp_path):
    """``selfrag serve`` (this checkout's code) with the tiny model on a free 127.0.0.1 port."""
    pytest.importorskip("llama_cpp", reason="the local extra (llama-cpp-python) is not installed")
    config = tmp_path / "selfrag.toml"
    config.write_text(CONFIG.format(kb=tmp_path / "kb"))
    try:
        server = ServeProcess(["--config", str(config)], cwd=tmp_path).__enter__()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server.url
    finally:
        server.__exit__()


@pytest.mark.slow
def test_the_page_with_a_real_selfrag_serve_and_the_tiny_model(served, page, tmp_path):
    page.goto(served + "/")
    page.wait_for_selector("#collection option", state="attached")
    assert "default" in page.text_content("#collection")  # the demo corpus, ingested at start-up

    doc = tmp_path / "osprey.txt"
    doc.write_text(OSPREY)
    assert "1 chunk(s) added" in upload(page, doc, "bikes")
    submit(page, "How much does the Osprey folding bike weigh?")
    page.wait_for_selector("#steps li", timeout=120_000)
    seen = wait_done(page, 600_000)
    steps_at = [t for what, t in seen if what == "step"]
    done_at = [t for what, t in seen if what == "done"][0]
    assert len([t for t in steps_at if t < done_at]) >= 3
    assert done_at - steps_at[0] > 250  # ms: the first steps showed while the model still worked
    steps = steps_of(page)
    assert steps[:3] == ["route", "retrieve", "grade_relevance"]
    assert page.text_content("#answer").strip()  # an answer, or the abstention
    if page.query_selector("#citations a"):
        assert page.text_content("#citations a").endswith("osprey")
    else:
        assert "abstained" in page.text_content("#flags") and "Abstain" in page.text_content("#steps")
    # the graded passage is the uploaded one
    graded = page.text_content("#steps li[data-step='grade_relevance'] .detail")
    chunk_id = graded.split("passage ", 1)[1].split(":", 1)[0]
    chunk = httpx.get(f"{served}/v1/collections/bikes/chunks/{chunk_id}", timeout=30).json()
    assert chunk["metadata"]["source"] == "upload:osprey.txt"
    tokens = page.text_content("#usage")
    assert "LM calls" in tokens and " 0 prompt" not in tokens
    shot = tmp_path / "serve.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("SELFRAG_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["SELFRAG_SCREENSHOT"])
