"""Is a service there? One quick HTTP request, before a client library that retries for minutes is asked.

MLflow's client retries an unreachable tracking server for several minutes (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``
with backoff) and boto3 waits on its connect timeouts: the pre-flight of ``ccda run`` and the first use of the
tracking client probe the server with :func:`probe` first, so an unreachable one is one line within seconds.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ServiceError

#: seconds a service has to answer a probe
PROBE_TIMEOUT_S = 5.0


def probe(url: str, what: str, fix: str, timeout: float = PROBE_TIMEOUT_S, refuse: Iterable[int] = ()) -> None:
    """One HTTP GET of ``url``: an HTTP answer means the service listens, unless its status is a gateway error
    (502, 503, 504) or in ``refuse`` (e.g. 404: something else answers there); no answer within ``timeout``
    seconds, a refused connection or an unknown host is a :class:`ServiceError` too."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout):  # noqa: S310
            return
    except urllib.error.HTTPError as e:
        if e.code not in (502, 503, 504, *refuse):
            return
        why = f"HTTP {e.code}" + (" from a gateway" if e.code >= 500 else f" for {url.rsplit('/', 1)[-1]}: not "
                                  f"the service expected there")
    except OSError as e:  # URLError, a refused connection, a timeout
        reason = getattr(e, "reason", e)
        why = (f"no answer within {timeout:g} s" if isinstance(reason, TimeoutError)
               else str(getattr(reason, "strerror", None) or reason))
    raise ServiceError(f"{what} at {url} does not answer ({why}). {fix}")
