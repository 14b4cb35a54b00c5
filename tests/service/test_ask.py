"""POST /v1/ask and the OpenAI-compatible /v1/chat/completions over the scripted engine."""

from programs.passages import ABSTAIN_ANSWER
from programs.types import RAGResult
from tests.service.conftest import GOOD, QUESTION, parse_sse


def test_ask_returns_the_result_model_of_ask_json(service):
    r = service.client.post("/v1/ask", json={"question": QUESTION})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == set(RAGResult.model_fields)  # the same model `selfrag ask --json` prints
    result = RAGResult.model_validate(body)
    assert result.answer == "It opened in 1931."
    assert result.supported == "fully" and result.usefulness is None and not result.abstained  # one candidate: not rated
    assert [c.source for c in result.citations] == ["bridges.md"]
    assert result.usage.lm_calls == len(service.engine.calls)
    assert result.usage.prompt_tokens == 10 * result.usage.lm_calls
    steps = [s.step for s in result.trace]
    assert steps[:3] == ["retrieve_rule", "route", "retrieve"] and "judge_support" in steps
    graded = [s.inputs["passage_id"] for s in result.trace if s.step == "grade_relevance"]
    assert "bridge" in graded


def test_ask_abstains_with_its_reason(make_service):
    service = make_service(script=dict(GOOD, grade_relevance={"relevance": "irrelevant"},
                                       rewrite_query={"query": "Zephyr bridge year"}))
    result = service.client.post("/v1/ask", json={"question": QUESTION}).json()
    assert result["abstained"] and result["answer"] == ABSTAIN_ANSWER and result["citations"] == []
    assert [s["step"] for s in result["trace"]][-1] == "abstain"
    assert "rewrite_query" in service.engine.roles()


def test_ask_in_another_collection_retrieves_from_it(service):
    up = service.client.post("/v1/collections/other/documents",
                             files={"files": ("zephyr.txt", b"The Zephyr bridge was painted green in 1990.")})
    assert up.status_code == 200, up.text
    result = service.client.post("/v1/ask", json={"question": QUESTION, "collection": "other"}).json()
    assert [c.get("source") for c in result["citations"]] == ["upload:zephyr.txt"]


def test_ask_an_unknown_collection_is_404(service):
    r = service.client.post("/v1/ask", json={"question": QUESTION, "collection": "nope"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"
    assert service.engine.calls == []  # refused before the model was asked anything


def test_chat_completions_is_openai_shaped_with_the_reflection_as_an_extra(service):
    r = service.client.post("/v1/chat/completions", json={
        "model": "selfrag", "temperature": 0.2,
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"},
                     {"role": "assistant", "content": "hi"}, {"role": "user", "content": QUESTION}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == "selfrag"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "It opened in 1931."}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"] > 0
    extra = body["selfrag"]
    assert extra["citations"][0]["source"] == "bridges.md" and extra["supported"] == "fully"
    assert extra["trace"][0]["step"] == "retrieve_rule"  # a factual question: the cheap rule decides
    # the last user message is the question
    decision_inputs = service.engine.calls[0][1]
    assert QUESTION in decision_inputs["question"]


def test_chat_completions_accepts_content_parts_and_streams_openai_chunks(service):
    r = service.client.post("/v1/chat/completions", json={
        "stream": True, "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    assert events[-1] == ("message", "[DONE]")
    chunks = [data for _, data in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "It opened in 1931."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["selfrag"]["citations"]


def test_chat_completions_without_a_user_message_is_refused(service):
    r = service.client.post("/v1/chat/completions", json={"messages": [{"role": "system", "content": "x"}]})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    assert service.engine.calls == []
