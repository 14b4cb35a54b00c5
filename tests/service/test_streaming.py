"""POST /v1/ask/stream: steps as the program records them, then the result; disconnect and timeout
cancel the program at its next step; a full queue answers 503 + Retry-After."""

from __future__ import annotations

import threading
import time

import httpx

from selfrag.service.settings import ServiceSettings
from tests.service.conftest import GOOD, QUESTION, Gate, parse_sse


def test_stream_sends_steps_before_the_result_and_they_match_the_trace(service):
    r = service.client.post("/v1/ask/stream", json={"question": QUESTION})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    names = [name for name, _ in events]
    assert names[0] == "started" and names[-1] == "result" and names.count("result") == 1
    assert set(names[1:-1]) == {"step"}
    final = {}
    for _, data in events[1:-1]:
        final[data["index"]] = data["step"]  # a repeated index replaces the earlier event
    result = events[-1][1]
    assert [final[i] for i in sorted(final)] == result["trace"]
    assert result["answer"] == "It opened in 1931."


def test_a_step_completed_after_recording_is_resent_with_its_final_values(service):
    events = parse_sse(service.client.post("/v1/ask/stream", json={"question": QUESTION}).text)
    grades = [d for n, d in events if n == "step" and d["step"]["step"] == "grade_relevance"]
    # SelfRAG adds the judged passage's id right after recording the step: the last event carries it
    last = {d["index"]: d["step"] for d in grades}
    assert last and all("passage_id" in s["inputs"] for s in last.values())


def test_steps_arrive_while_the_program_is_still_running(live):
    gate = Gate(GOOD["generate_answer"])
    service, server = live(script=dict(GOOD, generate_answer=gate))
    seen_before_release = []
    with httpx.Client(base_url=server.url, timeout=30) as client:
        with client.stream("POST", "/v1/ask/stream", json={"question": QUESTION}) as r:
            buffer, done = "", False
            for text in r.iter_text():
                buffer += text
                if not gate.release.is_set() and "grade_relevance" in buffer:
                    assert gate.reached.wait(10)
                    seen_before_release = [n for n, d in parse_sse(buffer) if n == "step"]
                    gate.release.set()  # the program is blocked in its draft: these came while it ran
            events = parse_sse(buffer)
    assert len(seen_before_release) >= 4  # decision, route, retrieve, grades
    assert events[-1][0] == "result" and not events[-1][1]["abstained"]


def test_disconnecting_cancels_the_program_at_its_next_step(live):
    gate = Gate(GOOD["generate_answer"])
    service, server = live(script=dict(GOOD, generate_answer=gate))
    with httpx.Client(base_url=server.url, timeout=30) as client:
        with client.stream("POST", "/v1/ask/stream", json={"question": QUESTION}) as r:
            for text in r.iter_text():
                if "grade_relevance" in text:
                    assert gate.reached.wait(10)  # the program is inside its draft call
                    break
    # the client is gone while the program waits for its LM
    time.sleep(0.3)  # let the server notice the disconnect
    gate.release.set()
    deadline = time.time() + 10
    while service.app.state.service.runner.gate.depth and time.time() < deadline:
        time.sleep(0.05)
    assert service.app.state.service.runner.gate.depth == 0
    roles = service.engine.roles()
    assert roles[-1] == "generate_answer" and "judge_support" not in roles  # stopped at the next step
    metrics = httpx.get(server.url + "/metrics", timeout=30).text
    assert 'selfrag_questions_total{outcome="cancelled"} 1.0' in metrics


def test_a_full_queue_answers_503_with_retry_after_and_never_hangs(live):
    gate = Gate(GOOD["generate_answer"])
    service, server = live(script=dict(GOOD, generate_answer=gate),
                           settings=ServiceSettings(max_queue=1, retry_after=7))
    results: dict[str, httpx.Response] = {}

    def ask(name):
        results[name] = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)

    first = threading.Thread(target=ask, args=("running",))
    first.start()
    assert gate.reached.wait(10)  # one question holds the model
    second = threading.Thread(target=ask, args=("waiting",))
    second.start()
    deadline = time.time() + 10
    while service.app.state.service.runner.gate.depth < 2 and time.time() < deadline:
        time.sleep(0.02)
    start = time.perf_counter()
    full = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
    stream_full = httpx.post(server.url + "/v1/ask/stream", json={"question": QUESTION}, timeout=30)
    assert time.perf_counter() - start < 5  # refused at once, not queued
    for r in (full, stream_full):
        assert r.status_code == 503 and r.headers["retry-after"] == "7"
        assert r.json()["error"]["code"] == "queue_full"
    gate.release.set()
    first.join(20)
    second.join(20)
    assert results["running"].status_code == results["waiting"].status_code == 200
    assert service.app.state.service.runner.gate.depth == 0


def test_a_question_over_the_time_limit_is_504_and_stops(make_service):
    gate = Gate(GOOD["generate_answer"])
    service = make_service(script=dict(GOOD, generate_answer=gate), settings=ServiceSettings(request_timeout=0.5))
    r = service.client.post("/v1/ask", json={"question": QUESTION})
    assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
    gate.release.set()
    deadline = time.time() + 10
    while service.app.state.service.runner.gate.depth and time.time() < deadline:
        time.sleep(0.05)
    assert "judge_support" not in service.engine.roles()

    gate2 = Gate(GOOD["generate_answer"])
    service.engine.script["generate_answer"] = gate2
    events = parse_sse(service.client.post("/v1/ask/stream", json={"question": QUESTION}).text)
    assert events[-1] == ("error", {"error": {"code": "timeout", "message": "the question took longer than 0.5 s"}})
    gate2.release.set()


def test_a_client_leaving_a_plain_ask_cancels_it_too(live):
    gate = Gate(GOOD["generate_answer"])
    service, server = live(script=dict(GOOD, generate_answer=gate))
    try:
        httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=httpx.Timeout(30, read=1.0))
    except httpx.ReadTimeout:
        pass  # the client gives up and closes its connection while the program waits for its LM
    assert gate.reached.is_set()
    time.sleep(1.0)  # the handler polls for the disconnect every 0.5 s
    gate.release.set()
    deadline = time.time() + 10
    while service.app.state.service.runner.gate.depth and time.time() < deadline:
        time.sleep(0.05)
    assert service.app.state.service.runner.gate.depth == 0
    assert "judge_support" not in service.engine.roles()
    metrics = httpx.get(server.url + "/metrics", timeout=30).text
    assert 'selfrag_errors_total{code="client_closed"} 1.0' in metrics
