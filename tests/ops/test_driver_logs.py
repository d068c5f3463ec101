"""Driver logs on the troubleshooting path (issue 14): the built-in API server's pods/{name}/log, the log tail
on the Pending page, the claim page and the node page, the RBAC hint on a 403, and the byte limit."""

import html

import pytest
from django.urls import reverse
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from claims import driverlogs
from mirror import roles
from mirror.kube import KubeClient
from ops.readiness import WARN, run_checks
from tests.fleet_data import make_user
from tests.ops_fixtures import claim_raw, pod_raw
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

DRIVER_LABELS = {"resource.gpudash.io/driver": "gpu.example.com"}
LOG = (
    "\n".join(
        [
            "I1203 10:00:00.000001       1 driver.go:88] Starting kubelet plugin for gpu.example.com",
            "I1203 10:00:01.000001       1 publisher.go:40] Published 2 devices on node-1",
            "E1203 10:00:05.000001       1 prepare.go:120] NodePrepareResources failed for claim team-a/train: CDI spec write: permission denied",
            "I1203 10:00:06.000001       1 prepare.go:131] retrying in 5s",
        ]
    )
    + "\n"
)


def driver_pod(node="node-1"):
    pod = pod_raw(f"driver-{node}", namespace="dra-system", node=node, labels=DRIVER_LABELS)
    # The kubelet plugin runs beside a sidecar: the log is read from the plugin container.
    pod["spec"]["containers"] = [
        {"name": "registrar", "image": "csi-node-driver-registrar"},
        {"name": "kubelet-plugin", "image": "driver"},
    ]
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return pod


def unprepared(server, live_cluster, log=LOG):
    """A claim allocated on node-1 and reserved for a pod bound there that stays Pending: not prepared."""
    pod = pod_raw("train", claim="train", phase="Pending", node="node-1")
    created = seed(server.store, pods=[pod, driver_pod()])
    uid = created["train"]["metadata"]["uid"]
    server.store.create("resourceclaims", claim_raw("train", devices=["gpu-0"], reserved=[("train", uid)]))
    server.set_pod_log("dra-system", "driver-node-1", log, container="kubelet-plugin")
    server.set_pod_log("dra-system", "driver-node-1", "registrar noise\n", container="registrar")
    resync(live_cluster, kinds=("Node", "ResourceSlice", "ResourceClaim", "Pod"))


@pytest.fixture
def admin_client(client, live_cluster):
    client.force_login(make_user("root", roles.ADMIN))
    return client


def page(client, url_name, *args):
    response = client.get(reverse(url_name, args=args))
    assert response.status_code == 200
    return response.content.decode()


def test_devcluster_serves_pod_logs_with_tail_limit_and_container(server):
    server.store.create("pods", driver_pod())
    server.set_pod_log("dra-system", "driver-node-1", LOG, container="kubelet-plugin")
    api = k8s.CoreV1Api(server.api_client())
    read = api.read_namespaced_pod_log
    assert read("driver-node-1", "dra-system", container="kubelet-plugin") == LOG
    assert (
        read("driver-node-1", "dra-system", container="kubelet-plugin", tail_lines=1)
        == LOG.splitlines(keepends=True)[-1]
    )
    assert (
        read("driver-node-1", "dra-system", container="kubelet-plugin", tail_lines=2, limit_bytes=10)
        == LOG.splitlines(keepends=True)[-2][:10]
    )
    assert read("driver-node-1", "dra-system", container="registrar") == ""
    with pytest.raises(ApiException) as err:
        read("driver-node-1", "dra-system")  # two containers: the API server wants a name
    assert (
        err.value.status == 400
        and "a container name must be specified" in err.value.body
        and "kubelet-plugin" in err.value.body
    )
    with pytest.raises(ApiException) as err:
        read("driver-node-1", "dra-system", container="nope")
    assert err.value.status == 400 and "is not valid for pod" in err.value.body
    with pytest.raises(ApiException) as err:
        read("missing", "dra-system", container="x")
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        read("driver-node-1", "dra-system", container="kubelet-plugin", limit_bytes=0)
    assert err.value.status == 400


def test_pending_page_of_an_unprepared_claim_shows_the_driver_log(server, live_cluster, admin_client):
    unprepared(server, live_cluster)
    body = page(admin_client, "ops:pending-pod", "dev", "team-a", "train")
    assert 'id="driver-logs"' in body and "dra-system/driver-node-1" in body
    assert "container kubelet-plugin" in body and "registrar noise" not in body
    text = html.unescape(body)
    assert "Published 2 devices on node-1" in text
    # The error line is highlighted, the others are not.
    assert '<span class="log-error">E1203 10:00:05.000001       1 prepare.go:120] NodePrepareResources failed' in text
    assert '<span class="log-error">I1203 10:00:06' not in text
    sent = [path for method, path in server.requests if "/log" in path]
    assert sent and all("tailLines=" in p and "limitBytes=" in p and "container=kubelet-plugin" in p for p in sent)

    # The claim page (not prepared: a bound pod still Pending), the node page and the driver pod's page show the same tail.
    for url_name, args in (
        ("claims:claim-detail", ("dev", "team-a", "train")),
        ("inventory:node-detail", ("dev", "node-1")),
        ("claims:pod-detail", ("dev", "dra-system", "driver-node-1")),
    ):
        other = html.unescape(page(admin_client, url_name, *args))
        assert "NodePrepareResources failed for claim team-a/train" in other, url_name
    # A live refresh of the claim's region does not call the API server for logs.
    assert 'id="driver-logs"' not in page(
        admin_client, "claims:pod-detail", "dev", "team-a", "train"
    )  # not a driver pod
    before = len([p for _, p in server.requests if "/log" in p])
    admin_client.get(reverse("claims:claim-detail", args=("dev", "team-a", "train")) + "?fragment=claim")
    assert len([p for _, p in server.requests if "/log" in p]) == before


def test_forbidden_log_gives_the_rbac_hint(server, live_cluster, admin_client):
    unprepared(server, live_cluster)
    rules = [
        {
            "verbs": ["get", "list", "watch"],
            "apiGroups": ["", "resource.k8s.io"],
            "resources": [
                "nodes",
                "pods",
                "namespaces",
                "events",
                "deviceclasses",
                "resourceslices",
                "resourceclaims",
                "resourceclaimtemplates",
            ],
        },
        {
            "verbs": ["create"],
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectrulesreviews", "subjectaccessreviews"],
        },
    ]
    server.set_rules(rules)
    server.enforce_rules = True
    body = html.unescape(page(admin_client, "ops:pending-pod", "dev", "team-a", "train"))
    assert 'class="rbac-hint"' in body and '"get" on "pods/log"' in body and "deploy/rbac-readonly.yaml" in body
    assert 'cannot get resource "pods/log"' in body  # the API server's own message
    assert "NodePrepareResources failed" not in body
    # The readiness RBAC check names the optional right that is missing.
    rbac = next(c for c in run_checks(live_cluster)["checks"] if c["id"] == "rbac")
    assert any(i["status"] == WARN and "get pods/log" in i["text"] and "Optional" in i["text"] for i in rbac["items"])
    assert not any("events" in i["text"] for i in rbac["items"] if i["status"] == WARN)

    server.set_rules(rules + [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}])
    body = html.unescape(page(admin_client, "ops:pending-pod", "dev", "team-a", "train"))
    assert "NodePrepareResources failed" in body and 'class="rbac-hint"' not in body


def test_a_huge_log_is_cut_at_the_limit(server, live_cluster, settings):
    settings.GPUDASH_OPS = {**settings.GPUDASH_OPS, "DRIVER_LOG_TAIL_LINES": 100, "DRIVER_LOG_LIMIT_BYTES": 8192}
    # 5,000 lines of 1 KiB: the 100-line tail alone is 100 KiB, far over the 8 KiB limit.
    lines = [f"I1203 10:{i // 60:02d}:{i % 60:02d} line {i:05d} " + "x" * 1000 for i in range(5000)]
    unprepared(server, live_cluster, log="\n".join(lines) + "\n")
    [tail] = driverlogs.node_driver_logs(live_cluster, "node-1")
    assert tail.cut and not tail.error
    shown = [text for text, _ in tail.lines]
    assert sum(len(t) + 1 for t in shown) <= 8192
    assert shown and shown[-1] == lines[-1]  # the newest lines are the ones kept
    assert shown == lines[-len(shown) :]  # complete lines only, in order
    # The cap holds even against a server that ignores limitBytes.
    kube = KubeClient.for_cluster(live_cluster)
    try:
        text, cut = kube.get_text(
            "/api/v1/namespaces/dra-system/pods/driver-node-1/log", {"container": "kubelet-plugin"}, max_bytes=4096
        )
    finally:
        kube.close()
    assert cut and len(text.encode()) == 4096


def test_driver_pods_and_logs_follow_the_namespace_scope_or_the_driver_grant(server, live_cluster, client):
    """A team-a operator does not see dra-system's driver pod, nor its log, on any page or in the API,
    until an admin grants it the driver namespace (AccessProfile.driver_namespaces)."""
    unprepared(server, live_cluster)
    user = make_user("tess", roles.OPERATOR, namespaces=["team-a"])
    client.force_login(user)
    surfaces = (
        ("ops:pending-pod", ("dev", "team-a", "train")),
        ("claims:claim-detail", ("dev", "team-a", "train")),
        ("inventory:node-detail", ("dev", "node-1")),
    )
    api = reverse("api:pod-pending", args=("dev", "team-a", "train"))

    def seen():
        pages = {name: html.unescape(page(client, name, *args)) for name, args in surfaces}
        response = client.get(api)
        assert response.status_code == 200
        pages["api"] = response.content.decode()
        return pages

    reads = len([p for _, p in server.requests if "/log" in p])
    for where, body in seen().items():
        assert "driver-node-1" not in body and "NodePrepareResources failed" not in body, where
    assert len([p for _, p in server.requests if "/log" in p]) == reads  # not even read
    # The Pending checklist still says the node's driver pod runs, without naming it.
    pending = seen()["ops:pending-pod"]
    assert "a driver pod in another namespace running and ready" in pending

    user.access_profile.driver_namespaces = ["dra-system"]
    user.access_profile.save()
    for where, body in seen().items():
        assert "dra-system/driver-node-1" in body or "driver-node-1" in body, where
        if where != "api":
            assert "NodePrepareResources failed for claim team-a/train" in body, where
    # The grant opens the driver pods, not the namespace: its other pods stay out of sight.
    assert client.get(reverse("claims:pod-detail", args=("dev", "dra-system", "driver-node-1"))).status_code == 404
