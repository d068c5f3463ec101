"""Kubernetes access for one Cluster: an ApiClient from its kubeconfig (or service account), raw JSON calls.

Everything goes through the official client's ApiClient (auth, TLS, exec plugins, proxies), but bodies are
read raw: the client's typed models drop fields they do not know, and the mirror must keep every field.
"""

import json
import logging

import urllib3
import yaml
from django.conf import settings
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from mirror.sync import fastjson

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0


class KubeError(Exception):
    """A call to the API server failed; `status` is the HTTP status (0 when there was no response)."""

    def __init__(self, message, status=0, body=None):
        super().__init__(message)
        self.status = status
        self.body = body

    @property
    def gone(self):
        return self.status == 410

    @property
    def not_found(self):
        return self.status == 404

    @property
    def auth_failed(self):
        return self.status in (401, 403)


class KubeConfigError(KubeError):
    """The cluster's connection settings cannot be used (missing kubeconfig, unknown context...)."""


def api_client_for(cluster):
    """A fresh `kubernetes.client.ApiClient` for a Cluster row."""
    configuration = k8s_client.Configuration()
    try:
        if cluster.in_cluster:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            if not cluster.kubeconfig:
                raise KubeConfigError(f"cluster {cluster.name}: no kubeconfig path set and not in-cluster")
            k8s_config.load_kube_config(
                config_file=cluster.kubeconfig,
                context=cluster.context or None,
                client_configuration=configuration,
                persist_config=False,
            )
    # The loader reports a malformed file with whatever the YAML parser or a dict lookup raised.
    except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError) as exc:
        raise KubeConfigError(f"cluster {cluster.name}: cannot load connection settings: {exc}") from exc
    # The client's own retry loop would hide outages from the watcher's backoff and error reporting.
    configuration.retries = False
    return k8s_client.ApiClient(configuration)


class KubeClient:
    """Raw-JSON GET and streaming calls over one ApiClient."""

    def __init__(self, api_client):
        self.api_client = api_client

    @classmethod
    def for_cluster(cls, cluster):
        return cls(api_client_for(cluster))

    def close(self):
        try:
            self.api_client.close()
        except Exception:  # closing a broken pool must never mask the real error
            log.debug("closing api client failed", exc_info=True)

    def _request(self, path, query=None, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), accept="application/json"):
        params = [(k, v) for k, v in (query or {}).items() if v is not None and v != ""]
        request = self.api_client.param_serialize(
            "GET",
            path,
            query_params=params,
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
        )
        url = request[1]
        try:
            response = self.api_client.call_api(*request, _request_timeout=timeout)
        except ApiException as exc:  # TLS failures come back as status 0
            raise KubeError(f"GET {url}: {exc.reason}", status=exc.status or 0) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"GET {url}: {exc}") from exc
        raw = response.response
        if not 200 <= raw.status <= 299:
            body = _safe_read(raw)
            raise KubeError(
                f"GET {url}: HTTP {raw.status} {_status_message(body)}".rstrip(), status=raw.status, body=body
            )
        return url, raw

    def get_json(self, path, query=None, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)):
        """GET a JSON document; garbage bodies raise KubeError naming the URL."""
        url, raw = self._request(path, query, timeout)
        try:
            data = raw.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"GET {url}: reading body failed: {exc}") from exc
        finally:
            raw.release_conn()
        try:
            doc = fastjson.loads(data)
        except ValueError as exc:
            raise KubeError(f"GET {url}: body is not JSON ({exc}): {data[:200]!r}", status=raw.status) from exc
        if not isinstance(doc, dict):
            raise KubeError(f"GET {url}: expected a JSON object, got {type(doc).__name__}", status=raw.status)
        return doc

    def get_text(self, path, query=None, max_bytes=65536, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)):
        """GET a text body (pods/log), reading at most `max_bytes`: (text, cut) where `cut` says the body
        went on. The cap holds whatever the server does with limitBytes."""
        url, raw = self._request(path, query, timeout, accept="*/*")
        data, cut = b"", False
        try:
            for chunk in raw.stream(16 * 1024, decode_content=True):
                data += chunk
                if len(data) > max_bytes:
                    data, cut = data[:max_bytes], True
                    break
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"GET {url}: reading body failed: {exc}") from exc
        finally:
            if cut:
                raw.close()  # the rest is not wanted: do not drain it into a pooled connection
            raw.release_conn()
        return data.decode("utf-8", "replace"), cut

    def stream_lines(self, path, query=None, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), accept="application/json"):
        """Open a streaming GET (a watch, or /metrics as text/plain); returns (response, iterator of raw lines)."""
        url, raw = self._request(path, query, timeout, accept=accept)
        return raw, _iter_lines(raw, url)


def _iter_lines(raw, url):
    buffer = b""
    try:
        for chunk in raw.stream(64 * 1024, decode_content=True):
            buffer += chunk
            while True:
                newline = buffer.find(b"\n")
                if newline < 0:
                    break
                line, buffer = buffer[:newline], buffer[newline + 1 :]
                if line.strip():
                    yield line
        if buffer.strip():
            yield buffer
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(f"watch {url}: connection lost: {exc}") from exc
    finally:
        raw.release_conn()


def _safe_read(raw):
    try:
        return raw.data
    except Exception:
        return b""
    finally:
        raw.release_conn()


def _status_message(body):
    """The `message` of a Kubernetes Status body, else the first bytes of the body."""
    try:
        doc = json.loads(body or b"")
        if isinstance(doc, dict) and doc.get("message"):
            return doc["message"]
    except ValueError:
        pass
    return (body or b"")[:200].decode("utf-8", "replace")


def ops_setting(name, default=None):
    """One of settings.GPUDASH_OPS: the operations' live reads and writes (timeouts, limits)."""
    return (getattr(settings, "GPUDASH_OPS", None) or {}).get(name, default)
