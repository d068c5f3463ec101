"""The tail of the DRA driver pods' logs on a node: the admin's next step when a claim is not prepared.

Driver pods are found in the mirror (the sync stores them, docs/sync.md "Pods"); their logs are read
through the API server's pods/log subresource, bounded in lines and bytes, from the container that
runs the kubelet plugin. Nothing is stored. A 403 names the RBAC rule to add (optional, see
deploy/rbac-readonly.yaml).
"""

import re
from dataclasses import dataclass, field
from urllib.parse import quote

from django.conf import settings
from django.utils.translation import gettext as _

from dra.model import label_selector_matches
from mirror.kube import KubeClient, KubeError

from .models import Pod

# What makes a line worth highlighting: klog's E/F prefix (E1203 12:00:00.000000 ...), logfmt and JSON
# levels, and the words drivers print when something failed.
ERROR_LINE = re.compile(
    r'^[EF]\d{4} |level=(error|fatal|panic)|"level":\s*"(error|fatal|panic)"|\b(error|failed|failure|panic|fatal)\b',
    re.IGNORECASE,
)
# Container names that run the kubelet plugin in the drivers we know (NVIDIA: "gpus"/"compute-domains",
# dra-example-driver: "plugin", most charts: "*kubelet-plugin*"); the first container otherwise.
DEFAULT_CONTAINER_HINTS = ("kubelet-plugin", "plugin", "gpus", "driver")
RBAC_HINT = (
    'Reading driver logs needs "get" on "pods/log" (core API group) for the dashboard\'s service account: '
    "the optional rule in deploy/rbac-readonly.yaml."
)


def ops(name, default=None):
    return (getattr(settings, "GPUDASH_OPS", None) or {}).get(name, default)


def limits():
    return int(ops("DRIVER_LOG_TAIL_LINES", 100)), int(ops("DRIVER_LOG_LIMIT_BYTES", 64 * 1024))


@dataclass
class LogTail:
    driver: str
    namespace: str
    pod: str
    container: str
    node: str
    lines: list = field(default_factory=list)  # [(text, is_error)]
    cut: bool = False  # the byte limit shortened the tail (fewer lines than asked for)
    error: str = ""
    forbidden: bool = False
    cluster_name: str = ""

    @property
    def error_count(self):
        return sum(1 for _, bad in self.lines if bad)

    @property
    def hint(self):
        return RBAC_HINT if self.forbidden else ""


def driver_of(pod_labels, drivers=None):
    """The driver (of `drivers`, None = any) a pod runs, from the label or selectors the readiness
    checks use; else ''."""
    label = ops("DRIVER_POD_LABEL")
    if label and pod_labels.get(label) and (drivers is None or pod_labels[label] in drivers):
        return pod_labels[label]
    for driver, selector in (ops("DRIVER_POD_SELECTORS") or {}).items():
        if (drivers is None or driver in drivers) and label_selector_matches(selector, pod_labels):
            return driver
    return ""


def driver_pods(cluster, node, drivers=None, namespaces=None):
    """[(driver, Pod row)] of the driver pods the mirror holds on `node` (of `drivers`; None = any driver),
    in `namespaces` only (roles.driver_namespaces: what the reader may see; None = all)."""
    out = []
    wanted = None if drivers is None else set(drivers)
    rows = Pod.objects.filter(cluster=cluster, node_name=node)
    if namespaces is not None:
        rows = rows.filter(namespace__in=namespaces)
    for pod in rows.order_by("namespace", "name"):
        driver = driver_of(pod.labels, wanted)
        if driver:
            out.append((driver, pod))
    return out


def choose_container(pod_raw):
    """The container whose log to read: GPUDASH_OPS DRIVER_LOG_CONTAINERS names first, then the usual
    kubelet-plugin names, else the first container."""
    names = [c.get("name") or "" for c in (pod_raw.get("spec") or {}).get("containers") or []]
    if not names:
        return ""
    for hint in tuple(ops("DRIVER_LOG_CONTAINERS") or ()) + DEFAULT_CONTAINER_HINTS:
        for name in names:
            if name == hint:
                return name
        for name in names:
            if hint in name:
                return name
    return names[0]


def split_lines(text):
    """[(line, is_error)]."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    return [(line, bool(ERROR_LINE.search(line))) for line in lines]


def read_tail(client, namespace, pod, container, tail_lines=None, limit_bytes=None):
    """(text, shortened) of a pod's log tail through the API server, at most `limit_bytes`. Raises KubeError.

    With both tailLines and limitBytes the API server sends the *oldest* lines of the tail first and
    stops at the limit, which would hide the newest lines. So a tail that does not fit is asked for
    again with as many lines as fit at the first answer's average line length: the newest lines,
    shortened (`shortened` is then True; a second answer cut again keeps its complete lines)."""
    default_lines, default_bytes = limits()
    tail_lines, limit_bytes = tail_lines or default_lines, limit_bytes or default_bytes
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/log"
    # Short: the pages wait for it (a claim or node page must not hang on an unreachable API server).
    timeout = float(ops("DRIVER_LOG_TIMEOUT_SECONDS", 5.0))

    def fetch(lines):
        query = {"container": container, "tailLines": lines, "limitBytes": limit_bytes}
        text, cut = client.get_text(path, query, max_bytes=limit_bytes, timeout=(timeout, timeout))
        return text, cut or len(text.encode("utf-8")) >= limit_bytes

    text, cut = fetch(tail_lines)
    if cut:
        complete = text.count("\n")
        fewer = int(limit_bytes * 0.9 / (len(text.encode("utf-8")) / complete)) if complete else 0
        if 0 < fewer < tail_lines:
            text, cut_again = fetch(fewer)
            return (text if not cut_again else _complete_lines(text)), True
        return _complete_lines(text), True
    return text, False


def _complete_lines(text):
    """Drop the line the byte limit cut in half."""
    return text[: text.rfind("\n") + 1] if "\n" in text else text


def node_driver_logs(cluster, node, drivers=None, client=None, namespaces=None):
    """A LogTail per driver pod of `drivers` (None = any driver) on `node` in `namespaces` (None = all;
    empty when none is mirrored)."""
    return tails(cluster, driver_pods(cluster, node, drivers, namespaces), client)


def tails(cluster, pods, client=None):
    """A LogTail per (driver, Pod row); `client`: an open KubeClient to use, else one is opened and closed."""
    if not pods:
        return []
    own = client is None
    out = []
    try:
        if own and not cluster.is_snapshot:
            try:
                client = KubeClient.for_cluster(cluster)
            except KubeError as exc:
                return [
                    LogTail(
                        d,
                        p.namespace,
                        p.name,
                        choose_container(p.raw),
                        p.node_name,
                        error=str(exc),
                        cluster_name=cluster.name,
                    )
                    for d, p in pods
                ]
        for driver, pod in pods:
            tail = LogTail(
                driver, pod.namespace, pod.name, choose_container(pod.raw), pod.node_name, cluster_name=cluster.name
            )
            if client is None:
                tail.error = _("A snapshot cluster has no API server to read logs from.")
            else:
                try:
                    text, tail.cut = read_tail(client, pod.namespace, pod.name, tail.container)
                    tail.lines = split_lines(text)
                except KubeError as exc:
                    tail.forbidden = exc.status == 403
                    tail.error = str(exc)
            out.append(tail)
    finally:
        if own and client is not None:
            client.close()
    return out


def page_context(cluster, node=None, drivers=None, pod=None, namespaces=None):
    """What templates/inventory/_driver_logs.html needs: the driver pods of a node (in `namespaces`, the
    reader's roles.driver_namespaces), or one driver pod (a page the reader may already see)."""
    lines, limit = limits()
    if pod is not None:
        driver = driver_of(pod.labels)
        found = tails(cluster, [(driver, pod)]) if driver else None
    else:
        found = node_driver_logs(cluster, node, drivers, namespaces=namespaces)
    return {"driver_logs": found, "driver_log_lines": lines, "driver_log_bytes": limit}
