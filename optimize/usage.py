"""What a compile costs: LM calls and tokens, counted by a DSPy callback."""

from __future__ import annotations

import threading
from typing import Any

from dspy.utils.callback import BaseCallback


class UsageMeter(BaseCallback):
    """Counts LM calls and tokens of every LM (copies included) while it is in ``dspy.settings.callbacks``.

    Tokens are read from each LM's history: every new history entry (by uuid) is counted once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self.calls = 0
        self.errors = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_prompt_tokens = 0
        self._pending: dict[str, Any] = {}

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self.calls += 1
            self._pending[call_id] = instance

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        with self._lock:
            instance = self._pending.pop(call_id, None)
            if exception is not None:
                self.errors += 1
            for entry in reversed(list(getattr(instance, "history", None) or [])):
                uid = entry.get("uuid")
                if uid in self._seen:
                    break
                self._seen.add(uid)
                usage = entry.get("usage") or {}
                self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                self.completion_tokens += int(usage.get("completion_tokens") or 0)
                details = usage.get("prompt_tokens_details") or {}
                cached = details.get("cached_tokens") if isinstance(details, dict) else None
                self.cached_prompt_tokens += int(cached or usage.get("cache_read_tokens") or 0)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {"lm_calls": self.calls, "lm_errors": self.errors, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens, "cached_prompt_tokens": self.cached_prompt_tokens}

    @staticmethod
    def diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
        return {k: after[k] - before.get(k, 0) for k in after}
