"""Load on `selfrag serve`: N concurrent clients on 127.0.0.1 for a bounded time, against a real server
process with the tiny model (one in-process model, a bounded queue in front of it).

    .venv/bin/python bench/bench_serve.py [--clients 4] [--seconds 60] [--max-queue 2] [--endpoint ask]

Starts `selfrag serve` (this checkout) on a free loopback port with a throwaway knowledge base (the demo
corpus), waits for /readyz, runs the clients until the deadline (requests in flight then finish), and
prints requests served, latency p50/p95 of answered requests, 503s (queue full: the client waits
Retry-After, capped at 1 s, and tries again), errors (anything else: must be 0) and the server's memory
(RSS) before and after, and its peak. Traffic goes to 127.0.0.1 only; every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from selfrag.service.process import ServeProcess

QUESTIONS = [
    "What is the range of the Heron cargo bike?",
    "How long is the warranty on the frame?",
    "Which bike folds?",
    "What does the Heron cost?",
]
CONFIG = """
[kb]
path = "{kb}"
[lm]
profile = "{profile}"
threads = {threads}
max_tokens = 96
[program]
retrieve_mode = "{retrieve}"
k = {k}
max_candidates = 1
max_rewrites = 0
max_regenerations = 0
max_web_rounds = 0
"""


def rss_mib(pid: int) -> tuple[float, float]:
    """(current, peak) resident memory of a process in MiB, from /proc."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Client(threading.Thread):
    def __init__(self, n: int, url: str, endpoint: str, deadline: float, timeout: float):
        super().__init__(daemon=True)
        self.n, self.url, self.endpoint, self.deadline, self.timeout = n, url, endpoint, deadline, timeout
        self.latencies: list[float] = []
        self.rejected = 0
        self.errors: list[str] = []
        self.abstained = 0

    def run(self) -> None:
        i = self.n
        with httpx.Client(base_url=self.url, timeout=self.timeout) as http:
            while time.monotonic() < self.deadline:
                question = QUESTIONS[i % len(QUESTIONS)]
                i += 1
                start = time.perf_counter()
                try:
                    if self.endpoint == "stream":
                        status, result = self._stream(http, question)
                    else:
                        r = http.post("/v1/ask", json={"question": question})
                        status, result = r.status_code, (r.json() if r.status_code == 200 else None)
                        if status == 503:
                            time.sleep(min(1.0, float(r.headers.get("retry-after", "1"))))
                except httpx.HTTPError as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                if status == 200 and result is not None:
                    self.latencies.append(time.perf_counter() - start)
                    self.abstained += bool(result.get("abstained"))
                elif status == 503:
                    self.rejected += 1
                else:
                    self.errors.append(f"HTTP {status}")

    def _stream(self, http: httpx.Client, question: str):
        import json

        with http.stream("POST", "/v1/ask/stream", json={"question": question}) as r:
            if r.status_code != 200:
                r.read()
                if r.status_code == 503:
                    time.sleep(min(1.0, float(r.headers.get("retry-after", "1"))))
                return r.status_code, None
            event, result = None, None
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "result":
                    result = json.loads(line[6:])
                elif line.startswith("data: ") and event == "error":
                    return 500, None
            return 200, result


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60.0, help="how long clients start new requests")
    ap.add_argument("--max-queue", type=int, default=2)
    ap.add_argument("--endpoint", choices=("ask", "stream"), default="ask")
    ap.add_argument("--profile", default="tiny", choices=("tiny", "local"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--retrieve", default="always", choices=("adaptive", "always", "never"))
    ap.add_argument("--timeout", type=float, default=600.0, help="per-question limit of the server")
    args = ap.parse_args()
    if args.clients < 1 or args.seconds <= 0:
        sys.exit("error: --clients must be >= 1 and --seconds > 0")

    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        config = Path(tmp) / "selfrag.toml"
        config.write_text(CONFIG.format(kb=Path(tmp) / "kb", profile=args.profile, threads=args.threads,
                                        retrieve=args.retrieve, k=args.k))
        args_serve = ["--config", str(config), "--max-queue", str(args.max_queue), "--timeout", str(args.timeout)]
        t0 = time.perf_counter()
        try:
            server = ServeProcess(args_serve, cwd=Path(tmp), ready_timeout=600).__enter__()
        except RuntimeError as exc:
            sys.exit(str(exc))
        try:
            startup = time.perf_counter() - t0
            rss_before, _ = rss_mib(server.pid)
            start = time.monotonic()
            deadline = start + args.seconds
            clients = [Client(n, server.url, args.endpoint, deadline, args.timeout + 60) for n in range(args.clients)]
            for c in clients:
                c.start()
            for c in clients:
                c.join(args.seconds + args.timeout + 120)
            wall = time.monotonic() - start
            rss_after, rss_peak = rss_mib(server.pid)
            scraped = httpx.get(server.url + "/metrics", timeout=10).text
        finally:
            server.__exit__()

    latencies = [x for c in clients for x in c.latencies]
    errors = [e for c in clients for e in c.errors]
    served = len(latencies)
    route = "/v1/ask/stream" if args.endpoint == "stream" else "/v1/ask"
    table = Table(title=f"selfrag serve under load ({args.profile}, {route}, "
                        f"{args.clients} clients, {args.seconds:g} s, max queue {args.max_queue}, "
                        f"retrieve={args.retrieve}, k={args.k})", show_header=False)
    rows = [
        ("requests served (200)", str(served)),
        ("throughput", f"{served / wall:.2f} req/s over {wall:.0f} s"),
        ("latency p50 / p95", f"{percentile(latencies, 0.5):.1f} s / {percentile(latencies, 0.95):.1f} s"),
        ("latency mean / max", f"{statistics.mean(latencies):.1f} s / {max(latencies):.1f} s" if latencies else "-"),
        ("503 queue full", str(sum(c.rejected for c in clients))),
        ("errors", str(len(errors)) + (f" ({'; '.join(sorted(set(errors))[:3])})" if errors else "")),
        ("abstained", str(sum(c.abstained for c in clients))),
        ("LM calls / tokens (server)", f"{metric(scraped, 'selfrag_lm_calls_total'):.0f} / "
                                       f"{metric(scraped, 'selfrag_tokens_total'):.0f}"),
        ("server RSS before / after / peak", f"{rss_before:.0f} / {rss_after:.0f} / {rss_peak:.0f} MiB"),
        ("server start-up (KB + model)", f"{startup:.1f} s"),
    ]
    for row in rows:
        table.add_row(*row)
    Console(width=160).print(table)
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
