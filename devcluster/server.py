"""A Kubernetes-compatible HTTP API server over a `Store`, for the demo and the tests.

It runs aiohttp on its own asyncio loop in a background thread, so a test can start it
in-process and drive it with the official `kubernetes` client over real HTTP. It serves
the core kinds the dashboard mirrors and resource.k8s.io/v1 with the semantics clients
depend on: resourceVersions, paginated lists, watches with bookmarks and timeouts,
410 Expired after compaction, status subresources, preconditions and finalizers.
Faults (5xx, garbage bodies, raw watch lines, groups disappearing) can be injected.
"""

import asyncio
import base64
import collections
import itertools
import json
import logging
import os
import threading
import time

import yaml
from aiohttp import web

from . import impersonation, validation
from .resources import RESOURCE_GROUP, RESOURCES
from .store import ApiError, BadRequest, Expired, Store, make_matcher

log = logging.getLogger(__name__)

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
ALLOW_ALL = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
AUTHZ_GROUP = "authorization.k8s.io"
STALE_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)
_CLOSE = object()


def _status(code, reason, message, details=None):
    return ApiError(code, reason, message, details).status()


def _json_response(body, status=200):
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type="application/json"
    )


def _error_response(error):
    return _json_response(error.status(), status=error.code)


def encode_continue(rv, key):
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{key[0]}/{key[1]}"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token):
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        namespace, name = data["start"].split("/", 1)
        return int(data["rv"]), (namespace, name)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise BadRequest(f"continue key is not valid: {token!r}") from None


class Fault:
    def __init__(self, count, status, body, path_prefix, method, watch, garbage=False):
        self.remaining = count
        self.status = status
        self.body = body
        self.path_prefix = path_prefix
        self.method = method
        self.watch = watch
        self.garbage = garbage

    def matches(self, request, is_watch):
        if self.path_prefix and not request.path.startswith(self.path_prefix):
            return False
        if self.method and request.method != self.method.upper():
            return False
        return self.watch is None or self.watch == is_watch

    def response(self):
        if self.garbage:
            return web.Response(
                body=b"<html><body>502 upstream sent garbage</body>", status=200, content_type="application/json"
            )
        if self.body is None:
            body = _status(self.status, "InternalError", f"injected failure (HTTP {self.status})")
        else:
            body = self.body
        if isinstance(body, (dict, list)):
            return _json_response(body, self.status)
        return web.Response(
            body=body.encode() if isinstance(body, str) else body, status=self.status, content_type="application/json"
        )


class WatchStream:
    """One open watch: events of one plural that pass its filter, queued for the writer."""

    def __init__(self, plural, api_version, match, start_rv):
        self.plural = plural
        self.api_version = api_version
        self.match = match
        self.last_rv = start_rv
        self.start_rv = start_rv
        self.queue = asyncio.Queue()
        self.closed = False  # seen between backlog chunks, where the queue is not read

    def close(self, error=None):
        """End the stream cleanly, after an ERROR event when `error` (a Status) is given."""
        self.closed = True
        if error is not None:
            self.queue.put_nowait(("ERROR", error))
        self.queue.put_nowait(_CLOSE)

    def offer(self, event):
        if event.rv <= self.start_rv:
            return  # already part of the backlog sent at start
        now_in = self.match(event.obj)
        if event.type == "DELETED":
            if now_in or (event.prev is not None and self.match(event.prev)):
                self.queue.put_nowait(("DELETED", event))
            return
        was_in = event.prev is not None and self.match(event.prev)
        # objects moving in or out of a selector appear as ADDED / DELETED, like the apiserver
        if now_in and was_in:
            self.queue.put_nowait(("MODIFIED", event))
        elif now_in:
            self.queue.put_nowait(("ADDED", event))
        elif was_in:
            self.queue.put_nowait(("DELETED", event))


# The DRA feature gates of a default v1.36 apiserver: name -> (stage as the metric labels it, enabled).
FEATURE_GATES = {
    "DynamicResourceAllocation": ("", True),
    "DRAAdminAccess": ("", True),
    "DRAPrioritizedList": ("", True),
    "DRAResourceClaimDeviceStatus": ("BETA", True),
    # Device health in the pod's container statuses (KEP-4680) and its message.
    "ResourceHealthStatus": ("BETA", True),
    "ResourceHealthStatusMessage": ("BETA", True),
    "DRAPartitionableDevices": ("BETA", True),
    "DRADeviceTaints": ("BETA", True),
    "DRADeviceTaintRules": ("BETA", False),
    "DRAConsumableCapacity": ("BETA", True),
    "DRADeviceBindingConditions": ("BETA", True),
    "DRAExtendedResource": ("BETA", True),
    "DRASchedulerFilterTimeout": ("BETA", True),
    "DRAResourceClaimGranularStatusAuthorization": ("BETA", True),
    "DRAListTypeAttributes": ("ALPHA", False),
    "DRANodeAllocatableResources": ("ALPHA", False),
    "DRAResourcePoolStatus": ("ALPHA", False),
    "DRAWorkloadResourceClaims": ("ALPHA", False),
}

# What changes in a default v1.37 apiserver (GA gates have no stage label).
V137_GATES = {
    "37": {
        "DRAResourceClaimDeviceStatus": ("", True),
        "ResourceHealthStatus": ("", True),
        "DRADeviceTaints": ("", True),
        "DRADeviceTaintRules": ("", True),
    }
}


class DevCluster:
    """The API server. `start()` returns the URL; the store stays usable directly."""

    def __init__(
        self,
        store=None,
        host="127.0.0.1",
        port=0,
        token=None,
        bookmark_interval=60.0,
        default_watch_timeout=1800,
        rules=None,
        watch_expired_as_event=False,
    ):
        if host not in LOCAL_HOSTS:
            raise ValueError(f"the devcluster serves on localhost only, not {host!r}")
        self.store = store if store is not None else Store()
        self.host = host
        self.port = port
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        # A real apiserver answers a watch from a compacted resourceVersion with HTTP 200 and
        # one ERROR event (code 410); False answers with an HTTP 410 Status instead.
        self.watch_expired_as_event = watch_expired_as_event
        self.rules = list(rules or ALLOW_ALL)
        self.enforce_rules = False
        self.extra_tokens = {}  # token -> rules, for a second identity (e.g. read-only)
        self.subjects = impersonation.Subjects()  # rules of impersonated users and groups
        self.disabled_groups = set()
        self.disabled_resources = set()
        self.devicetaintrule_versions = ()  # served versions of devicetaintrules; () = not served
        # The apiserver's /metrics: its feature gates (kubernetes_feature_enabled), and whether the
        # caller's RBAC allows GET /metrics (a nonResourceURLs rule; most clusters deny it).
        self.feature_gates = dict(FEATURE_GATES)
        self.minor_version = "36"
        self.metrics_allowed = True
        self.requests = collections.deque(maxlen=2000)  # (method, path_qs), for tests to inspect
        self.pod_logs = {}  # (namespace, pod, container) -> log text, served by pods/{name}/log
        self._faults = []
        self._faults_lock = threading.Lock()
        self._loop = None
        self._thread = None
        self._runner = None
        self._watches = set()
        self._pending = collections.deque()
        self._wake_scheduled = False
        self._dispatched_rv = 0

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self):
        if self._thread is not None:
            raise RuntimeError("devcluster already running")
        ready = threading.Event()
        failure = []

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve())
            except Exception as exc:  # reported to start()'s caller
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name=f"devcluster:{self.port}", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            self._thread = None
            raise failure[0]
        self._dispatched_rv = self.store.resource_version
        self.store.add_listener(self._on_store_event)
        return self.url

    async def _serve(self):
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def stop(self):
        if self._thread is None:
            return
        self.store.remove_listener(self._on_store_event)
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        future.result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._thread = None
        self._loop = None

    async def _shutdown(self):
        for watch in list(self._watches):
            watch.close()
        # Let streams write their terminating chunk; one stuck on a client that stopped reading
        # is cut by aiohttp's shutdown_timeout.
        for _ in range(50):
            if not self._watches:
                break
            await asyncio.sleep(0.01)
        await self._runner.cleanup()

    def restart(self, downtime=0.0):
        """Stop and start again on the same port with the same store (drops every watch)."""
        self.stop()
        if downtime:
            time.sleep(downtime)
        return self.start()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- client configuration ------------------------------------------------------

    def kubeconfig(self, context="devcluster"):
        user = {"token": self.token} if self.token else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": f"{context}-user", "user": user}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-user"}}],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path, context="devcluster"):
        """Write a kubeconfig the `kubernetes` client loads (load_kube_config / new_client_from_config)."""
        path = os.fspath(path)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(path, "w") as fh:
            yaml.safe_dump(self.kubeconfig(context), fh, sort_keys=False)
        if self.token:
            os.chmod(path, 0o600)
        return path

    def api_client(self, token=None):
        """A `kubernetes.client.ApiClient` for this server (token defaults to the server's)."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        token = token if token is not None else self.token
        if token:
            configuration.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(configuration)

    # -- served API surface ------------------------------------------------------------

    def disable_group(self, group):
        self.disabled_groups.add(group)

    def enable_group(self, group):
        self.disabled_groups.discard(group)

    def set_served_groups(self, groups):
        """Serve only these optional groups (currently only resource.k8s.io is optional)."""
        self.disabled_groups = {RESOURCE_GROUP} - set(groups)

    def disable_resource(self, plural):
        self.disabled_resources.add(plural)

    def enable_resource(self, plural):
        self.disabled_resources.discard(plural)

    def enable_devicetaintrules(self, versions=("v1beta2",)):
        self.devicetaintrule_versions = tuple(versions)

    def disable_devicetaintrules(self):
        self.devicetaintrule_versions = ()

    def serve_kubernetes_version(self, minor):
        """Answer as a default v1.<minor> apiserver: 36 (the default) or 37, where the device status
        of claims, the pods' device health and DeviceTaintRule (resource.k8s.io/v1 only) are GA."""
        minor = str(minor)
        if minor not in V137_GATES and minor != "36":
            raise ValueError(f"the devcluster answers as v1.36 or v1.37, not v1.{minor}")
        self.minor_version = minor
        self.feature_gates = dict(FEATURE_GATES)
        if minor == "37":
            self.feature_gates.update(V137_GATES["37"])
            self.devicetaintrule_versions = ("v1",)

    def set_rules(self, rules):
        """Rules answering SelfSubjectRulesReview / SubjectAccessReview (RBAC PolicyRule dicts,
        optionally with "namespaces": [...] to scope them)."""
        self.rules = list(rules)

    def set_pod_log(self, namespace, pod, text, container=None):
        """What GET pods/{pod}/log answers (for `container`, or the pod's only container)."""
        if container is None:
            containers = _container_names(self.store.get("pods", namespace, pod, copy=False))
            if len(containers) != 1:
                raise ValueError(f"pod {namespace}/{pod} has containers {containers}: name one")
            container = containers[0]
        self.pod_logs[(namespace, pod, container)] = text

    def add_token(self, token, rules):
        self.extra_tokens[token] = list(rules)

    def _versions(self, plural):
        if plural == "devicetaintrules":
            return self.devicetaintrule_versions
        return (RESOURCES[plural].version,)

    def _served(self, plural, group, version):
        info = RESOURCES.get(plural)
        return (
            info is not None
            and info.group == group
            and version in self._versions(plural)
            and group not in self.disabled_groups
            and plural not in self.disabled_resources
        )

    def _group_versions(self, group):
        if group in self.disabled_groups:
            return []
        versions = []
        for plural, info in RESOURCES.items():
            if info.group == group and plural not in self.disabled_resources:
                for version in self._versions(plural):
                    if version not in versions:
                        versions.append(version)
        return sorted(versions, key=lambda v: (v != "v1", v))

    # -- fault injection ---------------------------------------------------------------

    def fail_next(self, n, status=500, body=None, path_prefix=None, method=None, watch=None):
        """The next n matching requests get `status` with `body` (default: a Status object)."""
        with self._faults_lock:
            self._faults.append(Fault(n, status, body, path_prefix, method, watch))

    def garbage_next(self, n, path_prefix=None, method=None, watch=None):
        """The next n matching requests get HTTP 200 with a body that is not JSON."""
        with self._faults_lock:
            self._faults.append(Fault(n, 200, None, path_prefix, method, watch, garbage=True))

    def clear_faults(self):
        with self._faults_lock:
            self._faults.clear()

    def _take_fault(self, request, is_watch):
        with self._faults_lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.matches(request, is_watch):
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _call_in_loop(self, fn, *args):
        if self._loop is None:
            raise RuntimeError("devcluster is not running")
        done = threading.Event()

        def run():
            try:
                self._dispatch()
                fn(*args)
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(10)

    def inject_watch_line(self, plural, line):
        """Write a raw line (no newline needed) into every open watch stream of `plural`."""
        data = line.encode() if isinstance(line, str) else line
        if not data.endswith(b"\n"):
            data += b"\n"

        def put():
            for watch in self._watches:
                if watch.plural == plural:
                    watch.queue.put_nowait(("RAW", data))

        self._call_in_loop(put)

    def expire_watches(self, plural=None):
        """Send an ERROR 410 event to open watches (as when a watcher falls behind) and end them."""

        def put():
            for watch in self._watches:
                if plural in (None, watch.plural):
                    message = f"too old resource version: {watch.last_rv} ({self.store.compacted_rv})"
                    watch.close(_status(410, "Expired", message))

        self._call_in_loop(put)

    def close_watches(self, plural=None):
        """End open watch streams cleanly (like a server-side watch timeout)."""

        def put():
            for watch in self._watches:
                if plural in (None, watch.plural):
                    watch.close()

        self._call_in_loop(put)

    def abort_watches(self, plural=None):
        """Drop open watch connections without the terminating chunk, after the events queued so far
        (as a proxy or load balancer cutting a long-lived connection does)."""

        def put():
            for watch in self._watches:
                if plural in (None, watch.plural):
                    watch.queue.put_nowait(("ABORT", None))

        self._call_in_loop(put)

    def compact(self, keep_last=0, expire_watches=False):
        rv = self.store.compact(keep_last)
        if expire_watches:
            self.expire_watches()
        return rv

    def open_watches(self, plural=None):
        return sum(1 for w in list(self._watches) if plural in (None, w.plural))

    def wait_for_watches(self, plural=None, count=1, timeout=10.0):
        """Block until at least `count` watch streams (of `plural`) are open; True if they are."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.open_watches(plural) >= count:
                return True
            time.sleep(0.01)
        return False

    # -- store events -> watch streams ---------------------------------------------

    def _on_store_event(self, event):
        # called under the store lock, from any thread: hand over to the loop in batches
        self._pending.append(event)
        if not self._wake_scheduled and self._loop is not None:
            self._wake_scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._dispatch)
            except RuntimeError:  # loop closed while stopping
                pass

    def _dispatch(self):
        self._wake_scheduled = False
        pending = self._pending
        watches = self._watches
        while pending:
            event = pending.popleft()
            self._dispatched_rv = event.rv
            for watch in watches:
                if watch.plural == event.plural:
                    watch.offer(event)

    # -- HTTP ----------------------------------------------------------------------

    def _identity_rules(self, request):
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        if self.token is None and not self.extra_tokens:
            return self.rules
        if token is not None and token == self.token:
            return self.rules
        if token is not None and token in self.extra_tokens:
            return self.extra_tokens[token]
        return None

    async def _handle(self, request):
        self.requests.append((request.method, request.path_qs))
        query = request.query
        is_watch = query.get("watch", "").lower() in ("1", "true")
        rules = self._identity_rules(request)
        if rules is None:
            return _json_response(_status(401, "Unauthorized", "Unauthorized"), 401)
        fault = self._take_fault(request, is_watch)
        if fault is not None:
            return fault.response()
        try:
            identity = impersonation.impersonated_identity(self, request, rules)
            if identity is not None:  # from here on the request runs as that user, under its own rules
                request["identity"] = identity
                rules = self.subjects.rules_for(*identity)
            return await self._route(request, rules, is_watch)
        except ApiError as error:
            return _error_response(error)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug here must show as a 500 Status, not a dropped connection
            log.exception("devcluster: %s %s failed", request.method, request.path_qs)
            return _json_response(_status(500, "InternalError", f"devcluster error: {exc!r}"), 500)

    async def _route(self, request, rules, is_watch):
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return _json_response({"paths": ["/api", "/api/v1", "/apis", "/version", "/healthz"]})
        head = parts[0]
        if head in ("healthz", "readyz", "livez") and len(parts) == 1:
            return web.Response(text="ok")
        if head == "metrics" and len(parts) == 1 and request.method == "GET":
            return self._metrics(request)
        if head == "version" and len(parts) == 1:
            return _json_response(
                {
                    "major": "1",
                    "minor": self.minor_version,
                    "gitVersion": f"v1.{self.minor_version}.0-devcluster",
                    "gitCommit": "devcluster",
                    "gitTreeState": "clean",
                    "buildDate": "2026-01-01T00:00:00Z",
                    "goVersion": "go1.25",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                }
            )
        if head == "api":
            if len(parts) == 1:
                return _json_response(
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}
                        ],
                    }
                )
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            if len(parts) == 1:
                return _json_response(self._group_list())
            group = parts[1]
            if len(parts) == 2:
                return self._group(group)
            version, rest = parts[2], parts[3:]
        else:
            raise self._not_found()
        if group == AUTHZ_GROUP and version == "v1":
            return await self._authorization(request, rules, rest)
        if (
            group == impersonation.AUTHN_GROUP
            and version == "v1"
            and rest == ["selfsubjectreviews"]
            and request.method == "POST"
        ):
            return _json_response(impersonation.self_subject_review(request), 201)
        if not rest:
            return self._resource_list(group, version)
        namespace, plural, name, sub = self._parse_rest(rest)
        if not self._served(plural, group, version):
            raise self._not_found()
        info = RESOURCES[plural]
        if info.namespaced and namespace is None and (name is not None or request.method not in ("GET",)):
            raise self._not_found()
        if not info.namespaced and namespace is not None:
            raise self._not_found()
        is_log = sub == "log" and plural == "pods" and name is not None and request.method == "GET" and not is_watch
        if not is_log and (sub not in (None, "status") or (sub == "status" and not info.has_status)):
            raise self._not_found()
        verb = self._verb(request.method, name, is_watch)
        identity = request.get("identity")
        if (self.enforce_rules or identity) and not self._allowed(rules, verb, group, plural, sub, namespace, name):
            who = identity[0] if identity else "devcluster-user"
            raise ApiError(
                403,
                "Forbidden",
                f'{info.resource_label} "{name or ""}" is forbidden: User "{who}" cannot '
                f'{verb} resource "{plural + ("/" + sub if sub else "")}" in API group "{group}"'
                + (f' in the namespace "{namespace}"' if namespace else ""),
            )
        if is_log:
            return self._pod_log(request, namespace, name)
        api_version = f"{group}/{version}" if group else version
        if name is None:
            if request.method == "GET":
                if is_watch:
                    return await self._watch(request, plural, namespace, api_version)
                return self._list(request, plural, namespace, api_version)
            if request.method == "POST":
                body = await self._body(request)
                if not isinstance(body, dict):
                    raise BadRequest("the body of the request must be a JSON object")
                meta = body.setdefault("metadata", {})
                if info.namespaced:
                    if meta.get("namespace") and meta["namespace"] != namespace:
                        raise BadRequest(
                            "the namespace of the provided object does not match the namespace sent on the request"
                        )
                    meta["namespace"] = namespace
                created = self.store.create(plural, body, reset_status=True)
                return _json_response(_as_version(created, api_version), 201)
            raise ApiError(
                405,
                "MethodNotAllowed",
                f"the server does not allow this method on the requested resource ({request.method} {plural})",
            )
        if request.method == "GET":
            return _json_response(_as_version(self.store.get(plural, namespace, name, copy=False), api_version))
        if request.method == "PUT":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise BadRequest("the body of the request must be a JSON object")
            meta = body.setdefault("metadata", {})
            if meta.get("name") not in (None, name):
                raise BadRequest(
                    f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
                )
            meta["name"] = name
            if info.namespaced:
                meta["namespace"] = namespace
            updated = self.store.update(plural, body, subresource=sub, prepare=self._strategy(plural, sub))
            return _json_response(_as_version(updated, api_version))
        if request.method == "PATCH":
            body = await self._body(request)
            patched = self.store.patch(
                plural,
                namespace,
                name,
                body,
                request.headers.get("Content-Type", ""),
                subresource=sub,
                prepare=self._strategy(plural, sub),
            )
            return _json_response(_as_version(patched, api_version))
        if request.method == "DELETE" and sub is None:
            options = await self._body(request, optional=True) or {}
            result = self.store.delete(plural, namespace, name, preconditions=options.get("preconditions"))
            if result["metadata"].get("deletionTimestamp") and self.store.find(plural, namespace, name):
                return _json_response(result)  # still there, waiting for finalizers
            if plural == "pods":
                return _json_response(result)
            return _json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {"name": name, "group": info.group, "kind": plural, "uid": result["metadata"]["uid"]},
                }
            )
        raise ApiError(405, "MethodNotAllowed", f"method {request.method} is not allowed here")

    def _strategy(self, plural, sub):
        """The status strategy of a write through the API (validation.py), or None; the store's
        own methods, which tests use to plant any state, skip it."""
        update = validation.STATUS_UPDATES.get(plural) if sub == "status" else None
        if update is None:
            return None
        return lambda new, current: update(new, current, {k: v[1] for k, v in self.feature_gates.items()})

    def _metrics(self, request):
        """GET /metrics: the Prometheus text of kubernetes_feature_enabled (one line per gate, as the
        apiserver's component-base registers it) and kubernetes_build_info; 403 where RBAC denies it."""
        if not self.metrics_allowed:
            raise ApiError(
                403,
                "Forbidden",
                'forbidden: User "devcluster-user" cannot get path "/metrics"',
            )
        lines = [
            "# HELP kubernetes_build_info [ALPHA] A metric with a constant '1' value labeled by major, minor, "
            "git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes "
            "was built, and platform on which it is running.",
            "# TYPE kubernetes_build_info gauge",
            'kubernetes_build_info{build_date="2026-01-01T00:00:00Z",compiler="gc",git_commit="devcluster",'
            f'git_tree_state="clean",git_version="v1.{self.minor_version}.0-devcluster",go_version="go1.25",major="1",'
            f'minor="{self.minor_version}",'
            'platform="linux/amd64"} 1',
            "# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement "
            "of a k8s feature.",
            "# TYPE kubernetes_feature_enabled gauge",
        ]
        for name, (stage, enabled) in sorted(self.feature_gates.items()):
            lines.append(f'kubernetes_feature_enabled{{name="{name}",stage="{stage}"}} {1 if enabled else 0}')
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    def _pod_log(self, request, namespace, name):
        """GET pods/{name}/log: text/plain, with the apiserver's container, tailLines and limitBytes
        (previous, timestamps, sinceSeconds and follow are accepted and ignored)."""
        pod = self.store.get("pods", namespace, name, copy=False)
        containers = _container_names(pod)
        query = request.query
        container = query.get("container") or ""
        if not container:
            if len(containers) != 1:
                raise BadRequest(
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
                )
            container = containers[0]
        elif container not in containers:
            raise BadRequest(f"container {container} is not valid for pod {name}")
        numbers = {}
        for key in ("tailLines", "limitBytes"):
            if query.get(key) not in (None, ""):
                try:
                    numbers[key] = int(query[key])
                except ValueError:
                    raise BadRequest(f"{key}: invalid value {query[key]!r}: must be an integer") from None
                if numbers[key] < (0 if key == "tailLines" else 1):
                    raise BadRequest(
                        f"{key}: Invalid value: {numbers[key]}: must be {'>= 0' if key == 'tailLines' else 'greater than 0'}"
                    )
        text = self.pod_logs.get((namespace, name, container))
        data = (text if text is not None else _default_log(pod)).encode("utf-8")
        if "tailLines" in numbers:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[len(lines) - numbers["tailLines"] :]) if numbers["tailLines"] else b""
        if "limitBytes" in numbers:
            data = data[: numbers["limitBytes"]]
        return web.Response(body=data, content_type="text/plain", charset="utf-8")

    @staticmethod
    def _parse_rest(rest):
        """(namespace, plural, name, subresource) from the path after /api/v1 or /apis/g/v."""
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        else:
            namespace = None
        if len(rest) > 3:
            raise DevCluster._not_found()
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return namespace, plural, name, sub

    @staticmethod
    def _not_found():
        return ApiError(404, "NotFound", "the server could not find the requested resource")

    @staticmethod
    def _verb(method, name, is_watch):
        if method == "GET":
            return "watch" if is_watch else ("get" if name else "list")
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())

    async def _body(self, request, optional=False):
        raw = await request.read()
        if not raw:
            if optional:
                return None
            raise BadRequest("the request body is empty")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise BadRequest(f"the request body is not valid JSON: {exc}") from None

    # -- discovery -------------------------------------------------------------------

    def _group_entry(self, group):
        versions = self._group_versions(group)
        if not versions:
            return None
        return {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
        }

    def _group_list(self):
        authz = {
            "name": AUTHZ_GROUP,
            "versions": [{"groupVersion": f"{AUTHZ_GROUP}/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": f"{AUTHZ_GROUP}/v1", "version": "v1"},
        }
        groups = [authz]
        for group in ("apps", RESOURCE_GROUP):
            entry = self._group_entry(group)
            if entry:
                groups.append(entry)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _group(self, group):
        if group == AUTHZ_GROUP:
            entry = self._group_list()["groups"][0]
        else:
            entry = self._group_entry(group)
        if entry is None:
            raise self._not_found()
        return _json_response({"kind": "APIGroup", "apiVersion": "v1", **entry})

    def _resource_list(self, group, version):
        resources = []
        for plural, info in RESOURCES.items():
            if not self._served(plural, group, version):
                continue
            resources.append(
                {
                    "name": plural,
                    "singularName": info.kind.lower(),
                    "namespaced": info.namespaced,
                    "kind": info.kind,
                    "verbs": list(info.verbs),
                    **({"shortNames": list(info.short_names)} if info.short_names else {}),
                }
            )
            if info.has_status:
                resources.append(
                    {
                        "name": f"{plural}/status",
                        "singularName": "",
                        "namespaced": info.namespaced,
                        "kind": info.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if plural == "pods":
                resources.append(
                    {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]}
                )
        if not resources and not (group == "" and version == "v1"):
            raise self._not_found()
        return _json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources,
            }
        )

    # -- authorization reviews ---------------------------------------------------------

    @staticmethod
    def _rule_applies(rule, verb, group, resource, subresource, namespace, name):
        def has(values, value):
            return "*" in values or value in values

        full = f"{resource}/{subresource}" if subresource else resource
        return (
            has(rule.get("verbs", []), verb)
            and has(rule.get("apiGroups", []), group)
            and (has(rule.get("resources", []), full) or (not subresource and has(rule.get("resources", []), resource)))
            and (not rule.get("resourceNames") or name in rule["resourceNames"])
            and (not rule.get("namespaces") or namespace in rule["namespaces"])
        )

    def _allowed(self, rules, verb, group, resource, subresource, namespace, name):
        return any(self._rule_applies(r, verb, group, resource, subresource, namespace, name) for r in rules)

    async def _authorization(self, request, rules, rest):
        if (
            request.method != "POST"
            or len(rest) != 1
            or rest[0] not in ("selfsubjectrulesreviews", "selfsubjectaccessreviews", "subjectaccessreviews")
        ):
            raise self._not_found()
        if (
            rest[0] == "subjectaccessreviews"
            and (self.enforce_rules or request.get("identity"))
            and not self._allowed(rules, "create", AUTHZ_GROUP, "subjectaccessreviews", None, None, None)
        ):
            raise ApiError(
                403,
                "Forbidden",
                'subjectaccessreviews.authorization.k8s.io is forbidden: User "devcluster-user" '
                'cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io"',
            )
        body = await self._body(request)
        spec = body.get("spec") or {}
        kind = {
            "selfsubjectrulesreviews": "SelfSubjectRulesReview",
            "selfsubjectaccessreviews": "SelfSubjectAccessReview",
            "subjectaccessreviews": "SubjectAccessReview",
        }[rest[0]]
        if rest[0] == "selfsubjectrulesreviews":
            namespace = spec.get("namespace")
            resource_rules = [
                {k: v for k, v in rule.items() if k != "namespaces"}
                for rule in rules
                if not rule.get("namespaces") or namespace in rule["namespaces"]
            ]
            status = {
                "resourceRules": resource_rules,
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version", "/api", "/apis"]}],
                "incomplete": False,
            }
        elif (
            rest[0] == "subjectaccessreviews"
            and self.subjects.configured()
            and (spec.get("user") or spec.get("groups"))
        ):
            status = impersonation.review(self, spec)
        else:
            attrs = spec.get("resourceAttributes") or {}
            allowed = self._allowed(
                rules,
                attrs.get("verb", ""),
                attrs.get("group", ""),
                attrs.get("resource", ""),
                attrs.get("subresource", ""),
                attrs.get("namespace", ""),
                attrs.get("name", ""),
            )
            status = {
                "allowed": allowed,
                "reason": "allowed by devcluster rules" if allowed else "no devcluster rule allows it",
            }
        return _json_response(
            {
                "kind": kind,
                "apiVersion": f"{AUTHZ_GROUP}/v1",
                "metadata": {"creationTimestamp": None},
                "spec": spec,
                "status": status,
            },
            201,
        )

    # -- list --------------------------------------------------------------------------

    def _list(self, request, plural, namespace, api_version):
        query = request.query
        info = RESOURCES[plural]
        match = make_matcher(namespace, query.get("labelSelector"), query.get("fieldSelector"))
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise BadRequest(f"limit must be an integer, not {query.get('limit')!r}") from None
        token = query.get("continue")
        rv_param = query.get("resourceVersion")
        rv_match = query.get("resourceVersionMatch")
        after = None
        if token:
            if rv_param:
                raise BadRequest("specifying resource version is not allowed when using continue")
            rv, after = decode_continue(token)
            if rv < 0:
                rv = None  # an "inconsistent" continuation: carry on from the current state
            try:
                items, rv, last_key, more = self.store.list_page(plural, rv, after, limit, match)
            except Expired:
                fresh = encode_continue(-1, after)
                body = _status(410, "Expired", STALE_CONTINUE)
                body["metadata"] = {"continue": fresh}
                return _json_response(body, 410)
        else:
            rv = None
            if rv_param not in (None, "", "0"):
                try:
                    wanted = int(rv_param)
                except ValueError:
                    raise BadRequest(f"invalid resourceVersion {rv_param!r}") from None
                if rv_match == "Exact":
                    rv = wanted
                elif wanted > self.store.resource_version:
                    raise ApiError(
                        504, "Timeout", f"Too large resource version: {wanted}, current: {self.store.resource_version}"
                    )
            elif rv_match == "Exact":
                raise BadRequest("resourceVersionMatch=Exact requires a non-zero resourceVersion")
            items, rv, last_key, more = self.store.list_page(plural, rv, None, limit, match)
        metadata = {"resourceVersion": str(rv)}
        if more:
            metadata["continue"] = encode_continue(rv, last_key)
        # list items carry no kind/apiVersion, like a real apiserver's JSON lists
        body = {
            "kind": f"{info.kind}List",
            "apiVersion": api_version,
            "metadata": metadata,
            "items": [{k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"} for obj in items],
        }
        return _json_response(body)

    # -- watch -----------------------------------------------------------------------

    async def _watch(self, request, plural, namespace, api_version):
        query = request.query
        info = RESOURCES[plural]
        match = make_matcher(namespace, query.get("labelSelector"), query.get("fieldSelector"))
        bookmarks = query.get("allowWatchBookmarks", "").lower() in ("1", "true")
        send_initial = query.get("sendInitialEvents", "").lower() in ("1", "true")
        try:
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else self.default_watch_timeout
        except ValueError:
            raise BadRequest(f"invalid timeoutSeconds {query.get('timeoutSeconds')!r}") from None
        rv_param = query.get("resourceVersion") or ""
        try:
            from_rv = int(rv_param) if rv_param not in ("", "0") else None
        except ValueError:
            raise BadRequest(f"invalid resourceVersion {rv_param!r}") from None

        store = self.store
        initial, backlog, expired, watch = [], [], None, None
        with store.lock:
            self._dispatch_pending_locked()
            start_rv = store.resource_version
            if from_rv is None or send_initial:
                keys, objects = store.state_at(plural, start_rv)
                initial = [objects[k] for k in keys if match(objects[k])]
            else:
                try:
                    backlog = store.events_since(plural, from_rv)
                except Expired as exc:
                    expired = exc
            if expired is None:
                # registered before the first await: events after start_rv reach its queue
                watch = WatchStream(plural, api_version, match, start_rv)
                if from_rv is not None and not send_initial:
                    watch.last_rv = from_rv
                self._watches.add(watch)
        if expired is not None and not self.watch_expired_as_event:
            return _error_response(expired)

        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"}
        )
        response.enable_chunked_encoding()
        loop = asyncio.get_running_loop()
        # like the apiserver, timeoutSeconds counts from the request, backlog included
        deadline = loop.time() + timeout
        try:
            await response.prepare(request)
            if expired is not None:
                await response.write(self._line("ERROR", expired.status()))
            elif await self._send_backlog(response, watch, initial, backlog, match, deadline):
                if send_initial and bookmarks:
                    await response.write(
                        self._line(
                            "BOOKMARK",
                            {
                                "kind": info.kind,
                                "apiVersion": api_version,
                                "metadata": {
                                    "resourceVersion": str(start_rv),
                                    "annotations": {"k8s.io/initial-events-end": "true"},
                                },
                            },
                        )
                    )
                if not await self._send_live(response, watch, info, api_version, bookmarks, deadline):
                    if request.transport is not None:
                        request.transport.close()  # abort_watches(): flushed, but no terminating chunk
                    return response
            # The terminating chunk: clients tell a finished watch from a dropped connection by it.
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away
        except asyncio.CancelledError:
            raise  # server shutdown: aiohttp closes the connection
        except Exception as exc:
            # Headers are out: a Status response now would be spliced into the chunked body.
            # End the stream the way the apiserver reports a failed watch: an ERROR event.
            log.exception("devcluster: watch %s failed", request.path_qs)
            try:
                await response.write(
                    self._line("ERROR", _status(500, "InternalError", f"devcluster watch failed: {exc!r}"))
                )
                await response.write_eof()
            except ConnectionError:
                pass
        finally:
            if watch is not None:
                self._watches.discard(watch)
        return response

    async def _send_backlog(self, response, watch, initial, backlog, match, deadline):
        """Initial state or missed events, encoded and written 500 at a time. False when it had to
        stop early (timeout reached, or the watch closed): the caller then ends the stream cleanly,
        and the client resumes from the last resourceVersion it saw."""
        if not (initial or backlog):
            return True
        loop = asyncio.get_running_loop()
        if initial:
            lines = (self._line("ADDED", _as_version(obj, watch.api_version)) for obj in initial)
        else:
            lines = (
                self._versioned_line(kind, event, watch.api_version)
                for event in backlog
                for kind in (self._backlog_type(event, match),)
                if kind
            )
        while True:
            # Checked between chunks: a slow reader makes each write wait, and a long backlog must
            # neither outlive timeoutSeconds nor hold up stop()/close_watches().
            if loop.time() >= deadline or watch.closed:
                await self._send_closing_errors(response, watch)
                return False
            chunk = list(itertools.islice(lines, 500))
            if not chunk:
                return True
            await response.write(b"".join(chunk))

    async def _send_closing_errors(self, response, watch):
        # Only ERROR items (expire_watches): queued events come after the unsent part of the backlog.
        while not watch.queue.empty():
            item = watch.queue.get_nowait()
            if item is not _CLOSE and item[0] == "ERROR":
                await response.write(self._line("ERROR", item[1]))

    async def _send_live(self, response, watch, info, api_version, bookmarks, deadline):
        """Events as they happen, bookmarks, until the deadline or a close. False on abort_watches()."""
        loop = asyncio.get_running_loop()
        next_bookmark = loop.time() + self.bookmark_interval
        while True:
            now = loop.time()
            if now >= deadline:
                return True
            wait = deadline - now
            if bookmarks:
                wait = min(wait, max(0.0, next_bookmark - now))
            try:
                item = await asyncio.wait_for(watch.queue.get(), wait)
            except TimeoutError:
                if bookmarks and loop.time() >= next_bookmark:
                    bookmark_rv = max(watch.last_rv, self._dispatched_rv, watch.start_rv)
                    await response.write(
                        self._line(
                            "BOOKMARK",
                            {
                                "kind": info.kind,
                                "apiVersion": api_version,
                                "metadata": {"resourceVersion": str(bookmark_rv)},
                            },
                        )
                    )
                    watch.last_rv = bookmark_rv
                    next_bookmark = loop.time() + self.bookmark_interval
                continue
            batch = [item]
            while not watch.queue.empty() and len(batch) < 1000:
                batch.append(watch.queue.get_nowait())
            lines, outcome = [], None
            for item in batch:
                if item is _CLOSE:
                    outcome = True
                    break
                kind, payload = item
                if kind == "ABORT":
                    outcome = False
                    break
                if kind == "RAW":
                    lines.append(payload)
                elif kind == "ERROR":
                    lines.append(self._line("ERROR", payload))
                else:
                    lines.append(self._versioned_line(kind, payload, watch.api_version))
                    watch.last_rv = payload.rv
            if lines:
                await self._write_lines(response, lines)
            if outcome is not None:
                return outcome

    def _dispatch_pending_locked(self):
        # events recorded before this watch registers are covered by its backlog or initial
        # state; deliver them to the other watches first so ordering stays intact
        if self._pending:
            self._dispatch()

    @staticmethod
    def _backlog_type(event, match):
        now_in = match(event.obj)
        was_in = event.prev is not None and match(event.prev)
        if event.type == "DELETED":
            return "DELETED" if (now_in or was_in) else None
        if now_in and was_in:
            return "MODIFIED"
        if now_in:
            return "ADDED"
        return "DELETED" if was_in else None

    @staticmethod
    def _line(kind, obj):
        return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"

    def _versioned_line(self, kind, event, api_version):
        if event.obj.get("apiVersion") not in (None, api_version):
            return self._line(kind, _as_version(event.obj, api_version))  # a kind served in several versions
        return self._event_line(kind, event)

    def _event_line(self, kind, event):
        if kind == event.type:
            if event._line is None:
                event._line = self._line(kind, event.obj)
            return event._line
        return self._line(kind, event.obj)

    @staticmethod
    async def _write_lines(response, lines):
        # write in chunks so one huge initial state does not build a single giant buffer
        for start in range(0, len(lines), 500):
            await response.write(b"".join(lines[start : start + 500]))


def _as_version(obj, api_version):
    """The object as the version it was asked for serves it (DeviceTaintRule: v1beta2 or v1; the
    fields gpudash reads are the same in both)."""
    if obj.get("apiVersion") in (None, api_version):
        return obj
    return {**obj, "apiVersion": api_version}


def _container_names(pod):
    spec = pod.get("spec") or {}
    return [c.get("name") for c in (spec.get("containers") or []) + (spec.get("initContainers") or []) if c.get("name")]


def _default_log(pod):
    """What a demo driver's kubelet plugin (label app.kubernetes.io/component=kubelet-plugin) logs when no
    test set a log: a start-up in klog format, so the node pages of the demo have something to show."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if (meta.get("labels") or {}).get("app.kubernetes.io/component") != "kubelet-plugin":
        return ""
    node, app = spec.get("nodeName") or "?", (meta.get("labels") or {}).get("app.kubernetes.io/name") or "driver"
    return "".join(
        f"I0105 08:00:0{i}.000000       1 {line}\n"
        for i, line in enumerate(
            (
                f"main.go:92] Starting {app} kubelet plugin on node {node}",
                "plugin.go:61] Registered with the kubelet (dra.sock, registration.sock)",
                f"publisher.go:140] Published ResourceSlices for node {node}",
                "health.go:48] Device health monitoring started",
            )
        )
    )
