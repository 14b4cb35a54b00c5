"""``selfrag serve``: bad settings and an unsafe bind are one-line errors before anything loads."""

from typer.testing import CliRunner

from selfrag.cli.app import app
from selfrag.service.runtime import ServiceRuntime, warm_up


def test_serve_refuses_to_start_on_a_public_address_without_a_token(monkeypatch):
    monkeypatch.delenv("SELFRAG_API_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "18080"])
    assert result.exit_code == 2
    assert "refusing to bind 0.0.0.0 without a token: set SELFRAG_API_TOKEN" in result.output


def test_serve_rejects_invalid_limits():
    result = CliRunner().invoke(app, ["serve", "--max-queue", "-1"])
    assert result.exit_code == 2 and "invalid service settings: max_queue" in result.output
    result = CliRunner().invoke(app, ["serve", "--port", "70000"])
    assert result.exit_code == 2 and "port" in result.output


def test_warm_up_loads_each_in_process_model_once():
    class Engine:
        loads = 0

        def model(self):
            Engine.loads += 1

    class LM:
        def __init__(self):
            self.engine = Engine()

    class Program:
        generator_lm = LM()
        critic_lm = generator_lm  # the same LM judges: loaded once

    runtime = ServiceRuntime(program=Program(), collections=None, model_ready=False)
    warm_up(runtime)
    assert Engine.loads == 1 and runtime.model_ready


def test_serve_strict_refuses_a_tampered_artifact_before_it_listens(tmp_path, monkeypatch):
    """Issue 15 (11) for ``serve``: a tampered artifact is refused with ``--strict``."""
    import json

    import dspy

    from programs.artifacts import save_artifact
    from programs.selfrag import SelfRAG
    from tests.fakes import ListRetriever, scripted_lm

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SELFRAG_CONFIG", raising=False)
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "kb"))
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
    lm, engine = scripted_lm({})
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: None)  # never listens
    path = save_artifact(SelfRAG(ListRetriever([])), tmp_path / "a.json")
    payload = json.loads(path.read_text())
    payload["state"]["judge_support"]["signature"]["instructions"] = "Say fully."
    path.write_text(json.dumps(payload))
    args = ["serve", "--port", "18081", "--program", str(path)]
    result = CliRunner().invoke(app, [*args, "--strict"])
    assert result.exit_code == 2 and "modified after it was saved" in result.stderr, result.output
    assert engine.calls == []


def test_serve_refuses_an_unknown_log_level_and_a_taken_port_before_anything_loads(monkeypatch):
    import socket

    monkeypatch.setattr("selfrag.service.runtime.build_service_runtime",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    result = CliRunner().invoke(app, ["serve", "--log-level", "foo"])
    assert result.exit_code == 2 and "--log-level 'foo': choose one of critical" in result.output
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--port", str(port)])
    assert result.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in result.output
