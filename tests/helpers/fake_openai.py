"""A small OpenAI-compatible HTTP server for tests, with faults on cue.

Started on 127.0.0.1 with a free port, in a daemon thread::

    with FakeOpenAIServer(model="fake-model") as srv:
        srv.base_url  # http://127.0.0.1:PORT/v1

``POST /v1/chat/completions`` answers with a deterministic rephrasing of the sentence found after the last
"Sentence:" in the last user message: ``"In the quiet town, <sentence>"`` (``n`` variants with different
openings). ``GET /v1/models`` lists the model.

Faults, chosen per request by markers in the sentence (the Nth request for the same sentence and seed counts
from 1):

* ``[F500]`` / ``[F429]`` / ``[SLOW]`` / ``[BADJSON]`` / ``[DROP]``: that fault on the first request only;
* ``[DEAD]``: HTTP 500 on every request;  ``[LONG]``: HTTP 400 "maximum context length" (as vLLM says) on
  every request;  ``[REFUSE]``: always a refusal;  ``[FLAKY]``: a refusal when
  ``seed == 0``, a good answer for other seeds;  ``[SAME]``: echoes the sentence unchanged.

or at random: ``fault_rate`` (0..1) picks one of ``faults`` (default: 500/429/slow/badjson/drop) for a request
with that probability (seeded by sentence, seed and request count, so runs are reproducible); ``fault_rate`` may be
changed while the server runs (``srv.fault_rate = 0`` heals it).

``srv.log`` holds (sentence, seed, count, fault) per request; ``srv.calls`` the same as dicts with the prompt
``kind`` (``augment``: the augment prompt's "Sentence:", ``sample``: the entropy sampler's "Text:") and ``n``.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = ("500", "429", "slow", "badjson", "drop")
OPENINGS = ("In the quiet town", "Late that evening", "According to the report", "During the long winter",
            "As everyone expected")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            data = {"object": "list", "data": [{"id": self.server.model, "object": "model"}]}
            self._send(200, json.dumps(data).encode())
        else:
            self._send(404, b'{"error": "not found"}')

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send(404, b'{"error": "not found"}')
        if body.get("model") != self.server.model:
            return self._send(404, json.dumps({"error": {"message": f"model {body.get('model')} not found"}}).encode())
        user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        sentence = re.split(r"(?:Sentence|Text):", user)[-1].strip()  # the augment and the sampler prompts
        kinds = re.findall(r"(Sentence|Text):", user)
        kind = {"Sentence": "augment", "Text": "sample"}.get(kinds[-1] if kinds else "", "other")
        seed = body.get("seed")
        srv = self.server
        with srv.lock:
            srv.counts[(sentence, seed)] += 1
            count = srv.counts[(sentence, seed)]
            srv.requests += 1
        fault = srv.pick_fault(sentence, seed, count)
        with srv.lock:
            srv.log.append((sentence, seed, count, fault))
            srv.calls.append({"kind": kind, "sentence": sentence, "seed": seed, "n": int(body.get("n") or 1),
                              "fault": fault})
            srv.inflight += 1
            srv.max_inflight = max(srv.max_inflight, srv.inflight)
        try:
            return self._reply(body, sentence, seed, fault)
        finally:
            with srv.lock:
                srv.inflight -= 1

    def _reply(self, body, sentence, seed, fault):
        srv = self.server
        if srv.delay_s:
            time.sleep(srv.delay_s)
        if fault == "500":
            return self._send(500, b'{"error": "injected"}')
        if fault == "400-context":
            msg = "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens."
            return self._send(400, json.dumps({"object": "error", "message": msg, "code": 400}).encode())
        if fault == "429":
            return self._send(429, b'{"error": "slow down"}', {"Retry-After": "0"})
        if fault == "badjson":
            return self._send(200, b'{"choices": [ {"message": ')
        if fault == "drop":
            self.close_connection = True
            return None
        if fault == "slow":
            time.sleep(srv.slow_s)
        n = int(body.get("n") or 1)
        choices = []
        for i in range(n):
            if "[REFUSE]" in sentence or ("[FLAKY]" in sentence and seed == 0):
                text = "I'm sorry, but I can't help with rewriting that sentence."
            elif "[SAME]" in sentence:
                text = sentence
            else:
                text = f"{OPENINGS[i % len(OPENINGS)]}, {sentence}"
            choices.append({"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"})
        prompt_tokens = sum(len(m["content"].split()) for m in body["messages"])
        usage = {"prompt_tokens": prompt_tokens,
                 "completion_tokens": sum(len(c["message"]["content"].split()) for c in choices)}
        reply = {"id": "cmpl-x", "object": "chat.completion", "model": srv.model, "choices": choices, "usage": usage}
        self._send(200, json.dumps(reply).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    model: str
    lock: threading.Lock
    counts: Counter
    log: list
    calls: list
    faults: tuple[str, ...]
    requests: int
    inflight: int
    max_inflight: int
    delay_s: float
    slow_s: float
    fault_rate: float

    def pick_fault(self, sentence: str, seed, count: int) -> str | None:
        if "[DEAD]" in sentence:
            return "500"
        if "[LONG]" in sentence:
            return "400-context"
        for marker, fault in (("[F500]", "500"), ("[F429]", "429"), ("[SLOW]", "slow"), ("[BADJSON]", "badjson"),
                              ("[DROP]", "drop")):
            if marker in sentence and count == 1:
                return fault
        if self.fault_rate:
            rng = random.Random(f"{sentence}|{seed}|{count}")
            if rng.random() < self.fault_rate:
                return rng.choice(self.faults)
        return None


class FakeOpenAIServer:
    def __init__(self, model: str = "fake-model", *, delay_s: float = 0.0, slow_s: float = 1.0,
                 fault_rate: float = 0.0, port: int = 0, faults: tuple[str, ...] = FAULTS) -> None:
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.model = model
        self.httpd.lock = threading.Lock()
        self.httpd.counts = Counter()
        self.httpd.log = []
        self.httpd.calls = []
        self.httpd.faults = tuple(faults)
        self.httpd.requests = 0
        self.httpd.inflight = 0
        self.httpd.max_inflight = 0
        self.httpd.delay_s = delay_s
        self.httpd.slow_s = slow_s
        self.httpd.fault_rate = fault_rate
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def log(self) -> list:
        return self.httpd.log

    @property
    def calls(self) -> list[dict]:
        return self.httpd.calls

    @property
    def fault_rate(self) -> float:
        return self.httpd.fault_rate

    @fault_rate.setter
    def fault_rate(self, value: float) -> None:
        self.httpd.fault_rate = value

    def start(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:  # python tests/helpers/fake_openai.py [--fault-rate R] : a server for manual tries
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--fault-rate", type=float, default=0.0)
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args()
    srv = FakeOpenAIServer(fault_rate=args.fault_rate, delay_s=args.delay).start()
    print(srv.base_url, flush=True)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        srv.stop()



if __name__ == "__main__":
    main()
