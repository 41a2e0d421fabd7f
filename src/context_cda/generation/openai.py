"""``openai`` backend: any OpenAI-compatible chat-completions server (``vllm serve``, TGI, llama.cpp, OpenAI).

* bounded concurrency: at most ``concurrency`` requests in flight (an asyncio semaphore over one
  ``httpx.AsyncClient``);
* a per-request timeout; retries with exponential backoff and full jitter (``Retry-After`` honoured, capped) on
  HTTP 429, 5xx, timeouts, dropped connections and malformed JSON replies;
* a prompt whose retries are exhausted (or that gets a non-retryable 4xx) yields a result with ``error`` set;
  the run records it with its reason instead of stopping;
* :class:`~context_cda.errors.ServiceError` before any work when the server cannot be reached or does not serve
  the named model (``GET /models``), and when every prompt of a call failed to connect (server gone mid-run;
  finished work is kept, rerun to resume);
* the API key (``$api_key_env``) travels only over https, or over plain http to a loopback address (it never
  leaves the machine); plain http to any other host is a :class:`~context_cda.errors.ConfigError` before any
  request unless ``allow_insecure`` is set. Redirects are not followed, so the key cannot be sent on elsewhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import random
import re
import threading
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, ServiceError
from ..runtime.signals import run_async
from .base import (
    PROMPT_TOO_LONG,
    Conversation,
    GenerationResult,
    SamplingParams,
    permanent_error,
    truncate_at_stop,
)

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# an HTTP 400 body saying the prompt does not fit (OpenAI: context_length_exceeded; vLLM: "This model's maximum
# context length is 2048 tokens. However, you requested ...")
_CONTEXT_LENGTH = re.compile(r"context[ _]length|maximum context", re.IGNORECASE)


def check_key_transport(base_url: str, key_env: str, allow_insecure: bool) -> None:
    """Refuse to send the API key in ``$key_env`` over plain http to a host other than this machine."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if parts.scheme == "https" or allow_insecure or _is_loopback(parts.hostname or ""):
        return
    raise ConfigError(
        f"openai backend: ${key_env} is set and base_url {base_url} is plain http to {parts.hostname}, so the API "
        "key would travel unencrypted. Use an https:// base_url, or set augment.openai.allow_insecure=true (also "
        "read by entropy's sampler) if that network path is trusted, e.g. the cluster's vLLM Service behind its "
        "NetworkPolicy."
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Retryable(Exception):
    pass


class _ConnectFailure(_Retryable):
    pass


class OpenAIGenerator:
    backend = "openai"

    @classmethod
    def from_options(cls, model: str, opts: Any) -> OpenAIGenerator:
        from ..config import OpenAIServerConfig

        return cls(model, opts.openai or OpenAIServerConfig())

    def __init__(self, model: str, server: Any, *, check: bool = True) -> None:
        import httpx  # noqa: F401  (fail early with ImportError if missing)

        self.model_id = model
        self.cfg = server
        self.base_url = server.base_url.rstrip("/")
        key = os.environ.get(server.api_key_env or "", "")
        self.headers = {"Content-Type": "application/json"}
        if key:
            check_key_transport(self.base_url, server.api_key_env, getattr(server, "allow_insecure", False))
            self.headers["Authorization"] = f"Bearer {key}"
        self.stats = {"requests": 0, "retries": 0, "failed": 0}
        self._rng = random.Random()
        if check:
            self.check_server()

    # ------------------------------------------------------------------------------------------ server check
    def check_server(self) -> list[str]:
        """Return the served model ids; raise ServiceError when unreachable or the model is not served."""
        import httpx

        url = f"{self.base_url}/models"
        last: str = ""
        for attempt in range(min(3, self.cfg.max_attempts)):
            try:
                r = httpx.get(url, headers=self.headers, timeout=self.cfg.timeout_s)
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
            else:
                if r.status_code in RETRY_STATUS:
                    last = f"HTTP {r.status_code}"
                elif r.status_code != 200:
                    raise ServiceError(
                        f"{url} answered HTTP {r.status_code}: {r.text[:200]!r}. Check augment.openai.base_url "
                        f"and the API key in ${self.cfg.api_key_env}."
                    )
                else:
                    try:
                        ids = [m["id"] for m in r.json().get("data", [])]
                    except (ValueError, KeyError, TypeError, AttributeError):
                        last = "malformed /models reply"
                    else:
                        if ids and self.model_id not in ids:
                            raise ServiceError(
                                f"The server at {self.base_url} does not serve model {self.model_id!r}; it serves "
                                f"{', '.join(ids)}. Set augment.model to one of these (for vllm serve: the "
                                "--served-model-name or the model path)."
                            )
                        return ids
            self._sleep_sync(attempt)
        raise ServiceError(
            f"Cannot reach the OpenAI-compatible server at {self.base_url} ({last}). Start it (e.g. `vllm serve "
            "MODEL --host 127.0.0.1 --port 8000`) or set augment.openai.base_url."
        )

    def _delay(self, attempt: int, retry_after: float | None = None) -> float:
        d = min(self.cfg.backoff_max_s, self.cfg.backoff_base_s * (2 ** attempt))
        d = self._rng.uniform(0.5 * d, d)  # jitter
        if retry_after is not None:
            d = max(d, min(retry_after, self.cfg.backoff_max_s))
        return d

    def _sleep_sync(self, attempt: int) -> None:
        import time

        time.sleep(self._delay(attempt))

    # ------------------------------------------------------------------------------------------ generation
    def _payload(self, messages: Conversation, params: SamplingParams) -> dict[str, Any]:
        p: dict[str, Any] = {
            "model": self.model_id,
            "messages": messages,
            "n": params.n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if params.seed is not None:
            p["seed"] = params.seed
        if params.stop:
            p["stop"] = list(params.stop)
        return p

    async def _one(self, client: Any, sem: asyncio.Semaphore, messages: Conversation,
                   params: SamplingParams) -> GenerationResult:
        import httpx

        url = f"{self.base_url}/chat/completions"
        payload = self._payload(messages, params)
        last = ""
        connect_only = True
        for attempt in range(self.cfg.max_attempts):
            retry_after = None
            async with sem:
                self.stats["requests"] += 1
                try:
                    r = await client.post(url, json=payload, headers=self.headers)
                    if r.status_code in RETRY_STATUS:
                        ra = r.headers.get("retry-after")
                        retry_after = float(ra) if ra and ra.replace(".", "", 1).isdigit() else None
                        raise _Retryable(f"HTTP {r.status_code}")
                    if r.status_code != 200:
                        self.stats["failed"] += 1
                        if r.status_code == 400 and _CONTEXT_LENGTH.search(r.text):  # the prompt: no retry helps
                            return permanent_error(PROMPT_TOO_LONG, f"HTTP 400: {r.text[:200]}")
                        return GenerationResult(error=f"HTTP {r.status_code}: {r.text[:200]}")
                    try:
                        return self._parse(r.json(), params)
                    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
                        raise _Retryable(f"malformed reply ({type(e).__name__})") from None
                except httpx.ConnectError as e:
                    last = f"connection failed ({e})"
                except httpx.TimeoutException:
                    last, connect_only = f"timeout after {self.cfg.timeout_s:g}s", False
                except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
                    last, connect_only = f"connection dropped ({type(e).__name__})", False
                except _Retryable as e:
                    last, connect_only = str(e), False
            if attempt + 1 < self.cfg.max_attempts:
                self.stats["retries"] += 1
                await asyncio.sleep(self._delay(attempt, retry_after))
        self.stats["failed"] += 1
        res = GenerationResult(error=f"{last} (after {self.cfg.max_attempts} attempts)")
        res.finish_reasons = ["connect"] if connect_only else []
        return res

    def _parse(self, body: dict[str, Any], params: SamplingParams) -> GenerationResult:
        choices = sorted(body["choices"], key=lambda c: c.get("index", 0))
        texts = [truncate_at_stop(c["message"]["content"] or "", params.stop) for c in choices]
        if len(texts) != params.n:
            raise ValueError(f"expected {params.n} choices, got {len(texts)}")
        usage = body.get("usage") or {}
        return GenerationResult(
            texts=texts,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reasons=[c.get("finish_reason") or "" for c in choices],
        )

    async def _agenerate(self, prompts: Sequence[Conversation], params: SamplingParams) -> list[GenerationResult]:
        import httpx

        sem = asyncio.Semaphore(self.cfg.concurrency)
        limits = httpx.Limits(max_connections=self.cfg.concurrency, max_keepalive_connections=self.cfg.concurrency)
        async with httpx.AsyncClient(timeout=self.cfg.timeout_s, limits=limits) as client:
            return list(await asyncio.gather(*(self._one(client, sem, p, params) for p in prompts)))

    def generate(self, prompts: Sequence[Conversation], params: SamplingParams) -> list[GenerationResult]:
        if not prompts:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            results = run_async(self._agenerate(prompts, params))  # a SIGTERM cancels the requests in the loop
        else:  # called from inside an event loop (notebook): run ours in a thread
            box: dict[str, Any] = {}
            t = threading.Thread(target=lambda: box.update(r=asyncio.run(self._agenerate(prompts, params))))
            t.start()
            t.join()
            results = box["r"]
        if all(r.error and r.finish_reasons == ["connect"] for r in results):
            raise ServiceError(
                f"The server at {self.base_url} stopped answering ({results[0].error}). Finished items are kept; "
                "start the server again and rerun to resume."
            )
        for r in results:
            if r.error:
                r.finish_reasons = []
        return results

    def close(self) -> None:
        pass
