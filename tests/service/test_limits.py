"""Limits: question length, top-k, upload size/type/count, body size; every error a JSON code."""

import pytest

from selfrag.service.errors import CODES, ServiceError
from selfrag.service.settings import ServiceSettings
from tests.service.conftest import QUESTION


@pytest.fixture
def limited(make_service):
    return make_service(settings=ServiceSettings(max_question_chars=40, max_top_k=5, max_upload_bytes=200,
                                                 max_upload_files=2, max_body_bytes=4096))


def code(r):
    return r.status_code, r.json()["error"]["code"]


def test_question_length(limited):
    assert code(limited.client.post("/v1/ask", json={"question": "x" * 41})) == (422, "question_too_long")
    assert code(limited.client.post("/v1/ask/stream", json={"question": "x" * 41})) == (422, "question_too_long")
    chat = {"messages": [{"role": "user", "content": "x" * 41}]}
    assert code(limited.client.post("/v1/chat/completions", json=chat)) == (422, "question_too_long")
    assert code(limited.client.post("/v1/ask", json={"question": "   "})) == (422, "invalid_request")
    assert code(limited.client.post("/v1/ask", json={})) == (422, "invalid_request")
    assert code(limited.client.post("/v1/ask", json={"question": QUESTION, "extra": 1})) == (422, "invalid_request")
    assert limited.engine.calls == []


def test_top_k(limited):
    assert code(limited.client.post("/v1/search", json={"query": "bridge", "k": 6})) == (422, "top_k_too_large")
    assert code(limited.client.post("/v1/search", json={"query": "bridge", "k": 0})) == (422, "invalid_request")
    assert limited.client.post("/v1/search", json={"query": "bridge", "k": 5}).status_code == 200


def test_upload_size_type_and_count(limited):
    post = limited.client.post
    url = "/v1/collections/docs/documents"
    assert code(post(url, files={"files": ("big.txt", b"x" * 201)})) == (413, "upload_too_large")
    assert code(post(url, files={"files": ("tool.exe", b"MZ")})) == (415, "unsupported_file_type")
    assert code(post(url, files={"files": ("noext", b"text")})) == (415, "unsupported_file_type")
    three = [("files", (f"f{i}.txt", b"hello")) for i in range(3)]
    assert code(post(url, files=three)) == (413, "too_many_files")
    assert code(post(url, files={"files": ("empty.txt", b"   ")})) == (422, "nothing_ingested")
    assert code(post(url, data={"x": "1"})) == (422, "invalid_request")  # no files field
    assert post(url, files={"files": ("ok.txt", b"x" * 200)}).status_code == 200


def test_a_body_over_the_limit_is_refused_before_it_is_read(limited):
    r = limited.client.post("/v1/ask", content=b'{"question": "' + b"x" * 5000 + b'"}',
                            headers={"Content-Type": "application/json"})
    assert code(r) == (413, "body_too_large")
    assert limited.engine.calls == []


def test_a_chunked_body_over_the_limit_is_a_413_too(limited):
    def chunked(data: bytes):  # a generator: sent without Content-Length, Transfer-Encoding: chunked
        yield data

    big = b'{"query": "' + b"a" * 5000 + b'"}'
    r = limited.client.post("/v1/search", content=chunked(big), headers={"Content-Type": "application/json"})
    assert code(r) == (413, "body_too_large")
    r = limited.client.post("/v1/ask", content=chunked(b'{"question": "' + b"x" * 5000 + b'"}'),
                            headers={"Content-Type": "application/json"})
    assert code(r) == (413, "body_too_large") and limited.engine.calls == []
    ok = limited.client.post("/v1/search", content=chunked(b'{"query": "bridge"}'),
                             headers={"Content-Type": "application/json"})
    assert ok.status_code == 200, ok.text


def test_unknown_routes_and_methods_are_json_errors(service):
    assert code(service.client.get("/v1/nothing")) == (404, "not_found")
    assert code(service.client.get("/v1/ask")) == (405, "method_not_allowed")
    assert code(service.client.post("/v1/ask", content=b"{not json", headers={"Content-Type": "application/json"})) \
        == (422, "invalid_request")


def test_an_unexpected_failure_is_a_500_without_its_message(make_service):
    service = make_service()

    class Broken:
        def __call__(self, question):
            raise RuntimeError("database password is hunter2")

    service.app.state.service.runner.program = Broken()
    r = service.client.post("/v1/ask", json={"question": QUESTION})
    assert code(r) == (500, "internal") and "hunter2" not in r.text
    events = service.client.post("/v1/ask/stream", json={"question": QUESTION}).text
    assert '"code":"internal"' in events and "hunter2" not in events


def test_error_codes_are_known():
    with pytest.raises(ValueError):
        ServiceError("no_such_code", "x")
    assert all(400 <= status < 600 for status in CODES.values())
