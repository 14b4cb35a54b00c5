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
