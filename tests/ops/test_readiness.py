"""Cluster readiness checks against the built-in API server (versions, driver pods, RBAC reviews) and the mirror."""

from datetime import timedelta

import pytest
from django.utils import timezone

from claims.models import ClaimStateChange, Finding
from ops.readiness import FAIL, PASS, SKIP, WARN, check_recovery, run_checks
from tests.ops_fixtures import node_raw, pod_raw, slice_raw
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

READ_RULES = [
    {
        "verbs": ["get", "list", "watch"],
        "apiGroups": ["", "resource.k8s.io"],
        "resources": ["nodes", "pods", "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"],
    }
]
RELEASE_RULES = [
    {
        "verbs": ["patch"],
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims/status", "resourceclaims/binding", "resourceclaims"],
    },
    {"verbs": ["delete"], "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"]},
]


def by_id(report):
    return {c["id"]: c for c in report["checks"]}


def texts(check, status=None):
    return [i["text"] for i in check["items"] if status is None or i["status"] == status]


def driver_pod(node):
    pod = pod_raw(
        f"dra-{node}", namespace="dra-system", node=node, labels={"resource.gpudash.io/driver": "gpu.example.com"}
    )
    return pod


def test_versions_drivers_and_reporting(server, live_cluster):
    store = server.store
    seed(store, nodes=("node-1", "node-2"))
    store.create("pods", driver_pod("node-1"))
    store.create("pods", driver_pod("node-3"))  # a driver pod on a node that publishes nothing
    store.create("nodes", node_raw("node-3"))
    store.create("nodes", node_raw("gpu-4", labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8"}))
    store.create("resourceslices", slice_raw("ghost-node", ["gpu-0"]))
    store.create("resourceslices", slice_raw("node-5", ["gpu-0"], pool="split", name="split-a", count=2))
    store.create(
        "resourceslices", slice_raw("node-5", ["gpu-0"], pool="split", name="split-b", count=2)
    )  # duplicate name in pool
    server.set_rules(READ_RULES)
    resync(live_cluster)
    report = run_checks(live_cluster)
    checks = by_id(report)
    assert report["live"] and report["status"] == FAIL

    versions = checks["versions"]
    assert "v1" in versions["data"]["resource_versions"]
    assert versions["status"] == PASS

    drivers = checks["drivers"]
    assert any("node-3" in t and "no slices" in t for t in texts(drivers, FAIL))
    assert any("node-2" in t for t in texts(drivers, WARN))  # slices without a driver pod
    assert any("gpu-4" in t and "GPU nodes" in t for t in texts(drivers, WARN))

    reporting = checks["reporting"]
    assert any("ghost-node" in t for t in texts(reporting, FAIL))
    assert any("gpu.example.com/split/gpu-0" in t for t in texts(reporting, FAIL))
    assert any("gpu-4 (0 devices, label says 8)" in t for t in texts(reporting, WARN))


def test_rbac_reviews(server, live_cluster, settings):
    settings.GPUDASH_OPS = {
        **settings.GPUDASH_OPS,
        "RBAC_SUBJECTS": [{"user": "alice", "groups": ["system:authenticated"]}],
    }
    # The review answers from the server's rule set: here everyone may write slices (a misconfiguration).
    server.set_rules(
        READ_RULES
        + [{"verbs": ["create", "update"], "apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"]}]
    )
    rbac = by_id(run_checks(live_cluster))["rbac"]
    assert rbac["status"] == FAIL
    assert any(t.startswith("alice may create resourceslices") for t in texts(rbac, FAIL))
    assert any(
        "lacks patch resourceclaims/status" in t for t in texts(rbac, WARN)
    )  # writable cluster without release rights

    # The built-in server answers every review from one rule set, so each identity is checked on its own.
    server.set_rules(READ_RULES)
    rbac = by_id(run_checks(live_cluster))["rbac"]
    assert any(t.startswith("alice cannot write") for t in texts(rbac, PASS))
    assert any("lacks patch resourceclaims/status" in t for t in texts(rbac, WARN))

    server.set_rules(READ_RULES + RELEASE_RULES)
    rbac = by_id(run_checks(live_cluster))["rbac"]
    assert any("exactly what release actions need" in t for t in texts(rbac, PASS))

    live_cluster.read_only = True
    live_cluster.save()
    rbac = by_id(run_checks(live_cluster))["rbac"]
    assert any("read-only in gpudash" in t for t in texts(rbac, WARN))


def test_dashboard_missing_read_rights(server, live_cluster):
    server.set_rules([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["nodes"]}])
    rbac = by_id(run_checks(live_cluster))["rbac"]
    assert any("lacks watch nodes" in t for t in texts(rbac, FAIL))


def test_offline_cluster_skips_live_checks(server, live_cluster):
    seed(server.store)
    resync(live_cluster)
    server.stop()
    report = run_checks(live_cluster)
    checks = by_id(report)
    assert not report["live"]
    assert checks["rbac"]["status"] == SKIP
    assert checks["reporting"]["status"] == PASS


def test_recovery_counts_findings_and_release_durations(live_cluster):
    now = timezone.now()
    Finding.objects.create(
        cluster=live_cluster, rule="orphaned_allocation", claim_uid="u1", summary="x", first_seen=now, last_seen=now
    )
    Finding.objects.create(
        cluster=live_cluster, rule="deletion_blocked", claim_uid="u2", summary="x", first_seen=now, last_seen=now
    )
    for uid, release_after in (("a", 2), ("b", 30)):
        start = now - timedelta(hours=1)
        ClaimStateChange.objects.create(
            cluster=live_cluster,
            namespace="n",
            name=uid,
            uid=uid,
            at=start,
            old_state="reserved",
            new_state="allocated",
        )
        ClaimStateChange.objects.create(
            cluster=live_cluster,
            namespace="n",
            name=uid,
            uid=uid,
            at=start + timedelta(seconds=release_after),
            old_state="allocated",
            new_state="pending",
        )
    ClaimStateChange.objects.create(
        cluster=live_cluster,
        namespace="n",
        name="c",
        uid="c",
        at=now - timedelta(minutes=5),
        old_state="reserved",
        new_state="allocated",
    )
    recovery = check_recovery(live_cluster, now=now)
    assert recovery["data"]["releases"] == 2 and recovery["data"]["max_seconds"] == 30 and recovery["data"]["open"] == 1
    assert recovery["status"] == FAIL
    assert any("1 claim finding(s) still allocated" in t for t in texts(recovery, FAIL))
    assert any("1 claim(s) stuck deleting" in t for t in texts(recovery, WARN))


def _manifest_rules(name):
    from pathlib import Path

    import yaml

    docs = yaml.safe_load_all((Path(__file__).resolve().parents[2] / "deploy" / name).read_text())
    return [rule for doc in docs if doc and doc["kind"] == "ClusterRole" for rule in doc["rules"]]


def test_rbac_manifests_are_least_privilege_and_sufficient():
    from ops.readiness import NEEDED_READ, NEEDED_RELEASE, _rules_allow

    readonly, release = _manifest_rules("rbac-readonly.yaml"), _manifest_rules("rbac-release.yaml")
    assert all(_rules_allow(readonly, v, g, r) for v, g, r in NEEDED_READ)
    assert not any(_rules_allow(readonly, v, g, r) for v, g, r in NEEDED_RELEASE)
    assert all(_rules_allow(release, v, g, r) for v, g, r in NEEDED_RELEASE)
    write_verbs = {"create", "update", "patch", "delete", "deletecollection", "*"}
    granted = {(v, res) for rule in release for v in rule["verbs"] for res in rule["resources"]}
    assert granted == {
        ("patch", "resourceclaims/status"),
        ("patch", "resourceclaims/binding"),
        ("patch", "resourceclaims"),
        ("delete", "resourceclaims"),
    }
    assert not any(
        set(rule["verbs"]) & write_verbs for rule in readonly if rule.get("apiGroups") != ["authorization.k8s.io"]
    )
