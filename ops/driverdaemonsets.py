"""The DaemonSets that run DRA drivers' kubelet plugins, and how each stands on each node it targets.

A driver's pods are found by the configured selectors (GPUDASH_OPS DRIVER_POD_LABEL=<driver>,
DRIVER_POD_SELECTORS[<driver>]). When those match no pod, the DaemonSet whose name, namespace or
labels carry a word of the driver's name (rdma.example.com -> "rdma") is taken as a guess, and the
readiness check says so, with the selector that would match: the usual cause of "no driver pod runs
here" while the node page lists one is a Helm chart whose pods carry other labels than configured.

Live reads never drop the reader to mirror mode: listing DaemonSets needs a right the read-only RBAC
may lack, and the other checks still want the API server.
"""

from dataclasses import dataclass, field

from claims.models import Pod
from dra.model import label_selector_matches
from dra.nodefilters import required_affinity_matches
from mirror.kube import KubeError, ops_setting

# Parts of a driver name that say nothing about which DaemonSet serves it.
_COMMON_WORDS = {"com", "io", "org", "net", "dev", "ai", "example", "k8s", "x-k8s", "kubernetes", "www"}


@dataclass
class DriverPod:
    namespace: str
    name: str
    node: str
    phase: str
    ready: bool
    reason: str = ""
    service_account: str = ""


@dataclass
class DaemonSetView:
    namespace: str
    name: str
    selector: str  # the pods' label selector as text ("" when the DaemonSet itself could not be read)
    node_selector: dict = field(default_factory=dict)
    required_affinity: dict | None = None
    desired: int | None = None  # status.desiredNumberScheduled
    ready_count: int | None = None  # status.numberReady
    pods: list = field(default_factory=list)
    labels: dict = field(default_factory=dict)

    @property
    def key(self):
        return f"{self.namespace}/{self.name}"

    def targets(self, node):
        """Would the DaemonSet controller place a pod on this node (nodeSelector and required affinity)?"""
        labels = node.labels or {}
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.required_affinity is None or required_affinity_matches(self.required_affinity, node.name, labels)


def selector_text(label_selector):
    """A metav1.LabelSelector as the label-selector string the API takes (matchLabels, matchExpressions)."""
    parts = [f"{k}={v}" for k, v in sorted((label_selector.get("matchLabels") or {}).items())]
    for expr in label_selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def configured_selectors(driver):
    selectors = []
    if ops_setting("DRIVER_POD_LABEL"):
        selectors.append(f"{ops_setting('DRIVER_POD_LABEL')}={driver}")
    if (ops_setting("DRIVER_POD_SELECTORS") or {}).get(driver):
        selectors.append(ops_setting("DRIVER_POD_SELECTORS")[driver])
    return selectors


def name_words(driver):
    """The distinctive words of a driver name: gpu.nvidia.com -> {gpu, nvidia}; rdma.example.com -> {rdma}."""
    return {w for w in driver.lower().split(".") if w not in _COMMON_WORDS and len(w) > 1}


def _pod_view(raw):
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    phase = status.get("phase") or ""
    return DriverPod(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        node=spec.get("nodeName") or "",
        phase=phase,
        # A pod without a Ready condition (an older mirror row) counts by its phase.
        ready=ready.get("status") == "True" if ready else phase == "Running",
        reason=(ready or {}).get("reason") or status.get("reason") or "",
        service_account=spec.get("serviceAccountName") or "",
    )


def _owner(raw):
    for ref in (raw.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "DaemonSet" and ref.get("controller", True):
            return ref.get("name")
    return None


class DriverPodFinder:
    """One readiness run's view of driver pods and DaemonSets: live where allowed, else the mirror."""

    def __init__(self, cluster, reader):
        self.cluster = cluster
        self.reader = reader
        self.daemonsets, self.daemonset_error = self._daemonsets()
        self._mirror = None

    def _get(self, path, query=None):
        if not self.reader.live:
            raise KubeError(self.reader.error or "snapshot cluster")
        return self.reader.client.get_json(path, query, timeout=(self.reader.timeout, self.reader.timeout))

    def _daemonsets(self):
        try:
            doc = self._get("/apis/apps/v1/daemonsets")
        except KubeError as exc:
            return None, str(exc)
        out = []
        for raw in doc.get("items") or []:
            meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
            pod_spec = (spec.get("template") or {}).get("spec") or {}
            affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            out.append(
                DaemonSetView(
                    namespace=meta.get("namespace", ""),
                    name=meta.get("name", ""),
                    selector=selector_text(spec.get("selector") or {}),
                    node_selector=dict(pod_spec.get("nodeSelector") or {}),
                    required_affinity=affinity,
                    desired=status.get("desiredNumberScheduled"),
                    ready_count=status.get("numberReady"),
                    labels={
                        **(meta.get("labels") or {}),
                        **((spec.get("template") or {}).get("metadata") or {}).get("labels", {}),
                    },
                )
            )
        return out, ""

    def pods(self, selector, namespace=None):
        """Raw pods matching a label selector: live, else the mirror (which holds driver-looking pods)."""
        try:
            path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
            return (self._get(path, {"labelSelector": selector}) or {}).get("items") or []
        except KubeError:
            pass
        if self._mirror is None:
            self._mirror = list(Pod.objects.filter(cluster=self.cluster).values_list("namespace", "labels", "raw"))
        return [
            raw
            for ns, labels, raw in self._mirror
            if (namespace is None or ns == namespace) and label_selector_matches(selector, labels)
        ]

    def for_driver(self, driver):
        """(daemonsets, selectors, guessed): the driver's DaemonSets with their pods filled in.
        `guessed` is True when the configured selectors matched no pod and a name match stood in."""
        selectors = configured_selectors(driver)
        pods = {}
        for selector in selectors:
            for raw in self.pods(selector):
                meta = raw.get("metadata") or {}
                pods[(meta.get("namespace"), meta.get("name"))] = raw
        if pods:
            return self._group(pods.values()), selectors, False
        guess = self._guess(driver)
        if guess is not None:
            return [guess], selectors, True
        return [], selectors, False

    def _group(self, raws):
        """Pods grouped by their owning DaemonSet (pods without one form their own group)."""
        known = {(d.namespace, d.name): d for d in self.daemonsets or []}
        groups = {}
        for raw in raws:
            meta = raw.get("metadata") or {}
            owner = _owner(raw) or ""
            key = (meta.get("namespace", ""), owner)
            if key not in groups:
                ds = known.get(key)
                groups[key] = (
                    DaemonSetView(**{**ds.__dict__, "pods": []}) if ds else DaemonSetView(key[0], owner, selector="")
                )
            groups[key].pods.append(_pod_view(raw))
        return [groups[k] for k in sorted(groups)]

    def _guess(self, driver):
        words = name_words(driver)
        if not words:
            return None
        candidates = []
        if self.daemonsets is not None:
            for ds in self.daemonsets:
                text = " ".join([ds.namespace, ds.name, *map(str, ds.labels.values())]).lower()
                score = sum(w in text for w in words) + (0.5 if "dra" in text.replace("-", " ").split() else 0)
                if score >= 1:
                    candidates.append((score, ds.key, ds))
        else:  # no right to list DaemonSets: the mirror's pods, grouped by owner
            for view in self._group(raw for _ns, _labels, raw in self._mirror_rows()):
                text = " ".join([view.namespace, view.name]).lower()
                score = sum(w in text for w in words) + (0.5 if "dra" in text.replace("-", " ").split() else 0)
                if score >= 1 and view.name:
                    candidates.append((score, view.key, view))
        if not candidates:
            return None
        best = max(c[0] for c in candidates)
        top = sorted((c for c in candidates if c[0] == best), key=lambda c: c[1])
        if len(top) > 1:
            return None  # ambiguous: better no guess than a wrong one
        ds = top[0][2]
        if ds.selector and not ds.pods:
            ds = DaemonSetView(**{**ds.__dict__, "pods": [_pod_view(r) for r in self.pods(ds.selector, ds.namespace)]})
        return ds

    def _mirror_rows(self):
        if self._mirror is None:
            self._mirror = list(Pod.objects.filter(cluster=self.cluster).values_list("namespace", "labels", "raw"))
        return self._mirror
