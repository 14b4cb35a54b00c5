"""Health, readiness, Prometheus metrics, the page and its script."""

import re

from selfrag.service.app import STATIC_DIR
from tests.service.conftest import GOOD, QUESTION


def test_health_and_readiness(service):
    assert service.client.get("/healthz").json() == {"status": "ok"}
    ready = service.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"model": "ok", "store": "ok"}


def test_not_ready_when_the_store_is_unreachable_or_the_model_loading(service, monkeypatch):
    def down():
        raise ConnectionError("no route to chroma")

    monkeypatch.setattr(service.collections, "ping", down)
    r = service.client.get("/readyz")
    assert r.status_code == 503 and r.json()["error"]["code"] == "not_ready"
    assert r.json()["checks"]["store"] == "unreachable" and "retry-after" in r.headers
    monkeypatch.undo()
    service.runtime.model_ready = False
    r = service.client.get("/readyz")
    assert r.status_code == 503 and r.json()["checks"]["model"] == "loading"


def metric(text: str, name: str, **labels) -> float:
    label = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name + (f"{{{label}}}" if label else "")) + r" ([0-9.e+-]+)"
    m = re.search(pattern, text)
    assert m, f"{name} {labels} not in metrics"
    return float(m.group(1))


def test_metrics_count_requests_lm_calls_tokens_abstentions_and_errors(make_service):
    def grade(inputs):  # relevant only for the question about the opening: the other one abstains
        hit = "Zephyr" in inputs["passage"] and "open" in inputs["question"]
        return {"relevance": "relevant" if hit else "irrelevant"}

    service = make_service(script=dict(GOOD, grade_relevance=grade, rewrite_query={"query": "q"}))
    c = service.client
    answered = c.post("/v1/ask", json={"question": QUESTION}).json()
    abstained = c.post("/v1/ask", json={"question": "Who painted the Zephyr in 1990?"}).json()
    assert abstained["abstained"] and not answered["abstained"]
    c.post("/v1/ask", json={"question": "x" * 5000})
    c.get("/v1/collections/nope/stats")
    text = c.get("/metrics").text
    assert metric(text, "selfrag_requests_total", method="POST", route="/v1/ask", status="200") == 2
    assert metric(text, "selfrag_requests_total", method="POST", route="/v1/ask", status="422") == 1
    assert metric(text, "selfrag_request_seconds_count", route="/v1/ask") == 3
    calls = answered["usage"]["lm_calls"] + abstained["usage"]["lm_calls"]
    assert metric(text, "selfrag_lm_calls_total") == calls == len(service.engine.calls)
    assert metric(text, "selfrag_tokens_total", kind="prompt") == 10 * calls
    assert metric(text, "selfrag_tokens_total", kind="completion") == 5 * calls
    assert metric(text, "selfrag_abstentions_total") == 1
    assert metric(text, "selfrag_questions_total", outcome="answered") == 1
    assert metric(text, "selfrag_errors_total", code="question_too_long") == 1
    assert metric(text, "selfrag_errors_total", code="collection_not_found") == 1
    assert metric(text, "selfrag_queue_depth") == 0
    assert 'route="/v1/collections/{name}/stats"' in text and "nope" not in text  # templates, not raw paths


def test_the_page_is_self_contained_and_renders_text_only(service):
    page = service.client.get("/")
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text)  # no CDN or remote asset
    for asset in ("/static/app.js", "/static/style.css"):
        assert service.client.get(asset).status_code == 200
    script = (STATIC_DIR / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script
    assert "http://" not in script and "https://" not in script
