"""Instant queries against a Prometheus HTTP API (GET /api/v1/query), bounded and checked.

Hand-written over urllib3 (already used for the Kubernetes calls) rather than a client library: one
endpoint is needed, and every way the answer can be wrong must become a PrometheusError that says
what was wrong, since it is shown to operators as the cluster's utilization status.
"""

import math

import orjson
import urllib3

MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # a 40,000-GPU answer is ~10 MB; anything this big is a runaway query


class PrometheusError(Exception):
    """The query failed or Prometheus answered something that is not an instant vector."""


class PrometheusTimeout(PrometheusError):
    """No answer in time: the read timed out, or Prometheus gave up evaluating (errorType "timeout")."""


def _error(exc):
    """PrometheusTimeout for a connect or read timeout; a refused connection is an error (urllib3's
    NewConnectionError is a ConnectTimeoutError only by inheritance)."""
    timeout = isinstance(exc, urllib3.exceptions.TimeoutError | TimeoutError)
    if timeout and not isinstance(exc, urllib3.exceptions.NewConnectionError):
        return PrometheusTimeout
    return PrometheusError


def _pool():
    return urllib3.PoolManager(num_pools=4, maxsize=4, retries=False)


_http = _pool()


def instant_query(url, promql, *, auth_header="", timeout=10.0, at=None):
    """[(labels dict, float value)] of an instant vector query (at `at`, Unix seconds, default now).
    NaN and +-Inf samples are dropped."""
    endpoint = url.rstrip("/") + "/api/v1/query"
    headers = {"Accept": "application/json"}
    if auth_header:
        headers["Authorization"] = auth_header
    try:
        response = _http.request(
            "POST",
            endpoint,
            fields={
                "query": promql,
                "timeout": f"{max(round(timeout * 1000), 1)}ms",
                **({"time": f"{at:.3f}"} if at is not None else {}),
            },
            encode_multipart=False,
            headers=headers,
            timeout=urllib3.Timeout(connect=min(timeout, 5.0), read=timeout + 2.0),
            preload_content=False,
        )
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise _error(exc)(f"{endpoint}: {type(exc).__name__}: {exc}") from exc
    try:
        body = response.read(MAX_RESPONSE_BYTES + 1)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise _error(exc)(f"{endpoint}: reading the answer failed: {exc}") from exc
    finally:
        response.release_conn()
    if len(body) > MAX_RESPONSE_BYTES:
        raise PrometheusError(
            f"{endpoint}: answer to {promql!r} is over {MAX_RESPONSE_BYTES >> 20} MiB; narrow the series selector"
        )
    try:
        envelope = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PrometheusError(f"{endpoint}: HTTP {response.status}, not JSON: {body[:200]!r}") from None
    if not isinstance(envelope, dict) or envelope.get("status") not in ("success", "error"):
        raise PrometheusError(f"{endpoint}: HTTP {response.status}, not a Prometheus API answer: {body[:200]!r}")
    if envelope["status"] == "error" or response.status != 200:
        error = PrometheusTimeout if envelope.get("errorType") == "timeout" else PrometheusError
        raise error(
            f"{endpoint}: HTTP {response.status} {envelope.get('errorType', '')}: {envelope.get('error', '')} (query {promql!r})"
        )
    data = envelope.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusError(f"{endpoint}: expected an instant vector for {promql!r}, got {kind!r}")
    out = []
    for i, sample in enumerate(data["result"]):
        try:
            labels, (_, text) = sample["metric"], sample["value"]
            value = float(text)
        except (TypeError, KeyError, ValueError) as exc:
            raise PrometheusError(
                f"{endpoint}: result[{i}] of {promql!r} is not a sample: {str(sample)[:200]} ({exc})"
            ) from None
        if not isinstance(labels, dict):
            raise PrometheusError(f"{endpoint}: result[{i}] of {promql!r} has no label set")
        if math.isfinite(value):
            out.append((labels, value))
    return out
