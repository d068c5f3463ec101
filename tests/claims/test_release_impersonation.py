"""Release actions that run as the signed-in user (issue 13), against the built-in API server over HTTP
with the real kubernetes client: a SubjectAccessReview for exactly the planned request, then the write
with Impersonate-User / repeated Impersonate-Group headers, seen by the server as separate headers.
The dashboard's own credentials get only read, review and impersonate rights here, so a write that
went out as the service account would be refused."""

import pytest
import yaml
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.groupmap import parse_group_map
from accounts.models import SignInIdentity
from claims import stuck
from claims.models import AuditEntry, Finding
from claims.release.actions import release, release_finding
from claims.release.audit import DONE, DRY_RUN, REFUSED
from mirror import roles
from ops.pending import ClusterReader
from ops.readiness import FAIL, PASS, WARN, check_rbac
from tests.browser import ROOT
from tests.ops_fixtures import claim_raw, make_user, new_uid
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

STATUS_PATH = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c1/status"
REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
# What deploy/rbac-impersonate.yaml grants the dashboard (plus the read-only rights): no write of its own.
READ = [{"verbs": ["get", "list", "watch"], "apiGroups": ["", "resource.k8s.io"], "resources": ["*"]}]
REVIEW = [
    {
        "verbs": ["create"],
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectrulesreviews", "subjectaccessreviews"],
    }
]
IMPERSONATE = [
    {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"]},
    {
        "verbs": ["impersonate"],
        "apiGroups": [""],
        "resources": ["groups"],
        "resourceNames": ["oidc:gpu-team-a", "oidc:gpu-ops"],
    },
]
TEAM_A_RELEASE = [
    {
        "verbs": ["patch"],
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims/status"],
        "namespaces": ["team-a"],
    }
]


def signed_in(username, groups, namespaces=None):
    """A user as an OIDC sign-in leaves it: operator in gpudash, the cluster names it oidc:<name>."""
    user = make_user(username, roles.OPERATOR, namespaces)
    SignInIdentity.objects.create(
        user=user,
        issuer="https://idp.example",
        subject=f"sub-{username}",
        groups=groups,
        kube_username=f"oidc:{username}",
        kube_groups=[f"oidc:{g}" for g in groups],
    )
    return user


@pytest.fixture
def stale(server, live_cluster, settings):
    settings.GPUDASH_KUBE_IMPERSONATION = ("*",)
    server.set_rules(READ + REVIEW + IMPERSONATE)
    server.enforce_rules = True
    server.subjects.enable()  # a subject without rules is denied
    gone = new_uid()
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("gone", gone)]))
    resync(live_cluster, kinds=("ResourceClaim", "Pod"))
    stuck.detect(live_cluster)
    return Finding.objects.get(rule=stuck.STALE_RESERVATION)


def writes(server):
    return [(m, p) for m, p in server.requests if m in ("PATCH", "DELETE", "PUT")]


def test_allowed_user_release_runs_as_that_user(server, stale):
    alice = signed_in("alice", ["gpu-team-a", "gpu-ops"])
    server.subjects.set_group_rules("oidc:gpu-team-a", TEAM_A_RELEASE)
    before = server.store.get("resourceclaims", "team-a", "c1")

    dry = release_finding(alice, stale, dry_run=True)
    assert dry.outcome == DRY_RUN, dry.reason
    assert "The cluster allows it for oidc:alice" in dry.reason
    review = dry.identity["review"]
    assert review["allowed"] is True and "oidc:alice" in review["reason"]
    assert review["attributes"] == {
        "verb": "patch",
        "group": "resource.k8s.io",
        "version": "v1",
        "resource": "resourceclaims",
        "namespace": "team-a",
        "name": "c1",
        "subresource": "status",
    }
    assert writes(server) == [] and server.store.get("resourceclaims", "team-a", "c1") == before

    # The dry-run page says whom the request would be sent as and what the cluster answered.
    client = Client()
    client.force_login(alice)
    page = client.post(reverse("ops:stuck-release"), {"ids": [stale.id], "step": "dry-run"}).content.decode()
    assert "Sent as oidc:alice (groups: oidc:gpu-team-a, oidc:gpu-ops), impersonated by devcluster-user." in page
    assert "The cluster allows it." in page

    done = release_finding(alice, stale, dry_run=False, expected_resource_version=dry.plan.request.resource_version)
    assert done.outcome == DONE, done.reason
    assert server.store.get("resourceclaims", "team-a", "c1")["status"].get("reservedFor") in (None, [])
    # The write went out as alice, both groups as separate Impersonate-Group headers (aiohttp's getall).
    assert [s for s in server.subjects.seen if s[0] == "PATCH"] == [
        ("PATCH", STATUS_PATH, "oidc:alice", ["oidc:gpu-team-a", "oidc:gpu-ops"])
    ]
    assert ("POST", REVIEWS) in server.requests

    entry = AuditEntry.objects.get(dry_run=False)
    assert entry.outcome == DONE and entry.username == "alice"
    assert entry.kube_identity["dashboard"] == "devcluster-user"
    assert entry.kube_identity["user"] == "oidc:alice" and entry.kube_identity["groups"] == [
        "oidc:gpu-team-a",
        "oidc:gpu-ops",
    ]
    assert entry.kube_identity["review"]["allowed"] is True
    assert [e.kube_identity["review"]["allowed"] for e in AuditEntry.objects.filter(dry_run=True)] == [True, True]


def test_denied_user_gets_403_with_the_clusters_reason(server, stale):
    bob = signed_in("bob", ["gpu-team-a"])  # gpudash lets bob operate in team-a; the cluster has no rule for him
    before = server.store.get("resourceclaims", "team-a", "c1")
    client = APIClient()
    client.force_authenticate(bob)

    dry = client.post(f"/api/v1/findings/{stale.id}/release", {"dry_run": True}, format="json")
    assert dry.status_code == 403
    assert dry.json()["result"]["identity"]["review"]["allowed"] is False

    answer = client.post(
        "/api/v1/claims/dev/team-a/c1/release", {"action": "remove_reservations", "dry_run": False}, format="json"
    )
    assert answer.status_code == 403
    body = answer.json()
    reason = body["result"]["reason"]
    assert reason.startswith('The cluster denies oidc:bob this request: RBAC: user "oidc:bob"')
    assert 'patch on "resourceclaims/status"' in reason and 'namespace "team-a"' in reason
    assert body["result"]["plan"]["request"]["method"] == "PATCH"  # what would have been sent

    assert writes(server) == [] and [s for s in server.subjects.seen if s[2] == "oidc:bob"] == []
    assert server.store.get("resourceclaims", "team-a", "c1") == before
    entry = AuditEntry.objects.filter(dry_run=False).get()
    assert entry.outcome == REFUSED and entry.username == "bob" and entry.reason == reason
    assert entry.kube_identity["user"] == "oidc:bob" and entry.kube_identity["dashboard"] == "devcluster-user"
    assert entry.kube_identity["review"]["allowed"] is False
    assert AuditEntry.objects.filter(dry_run=True, outcome=REFUSED).count() == 1


def test_impersonation_grant_that_misses_a_group_is_refused_by_the_cluster(server, stale):
    carol = signed_in("carol", ["gpu-team-a", "gpu-other"])  # oidc:gpu-other is not in the dashboard's grant
    server.subjects.set_group_rules("oidc:gpu-team-a", TEAM_A_RELEASE)
    before = server.store.get("resourceclaims", "team-a", "c1")
    outcome = release(carol, stale.cluster, "team-a", "c1", "remove_reservations", dry_run=False)
    assert outcome.outcome == REFUSED and outcome.permission_denied
    assert outcome.status_code == 403 and 'cannot impersonate resource "groups"' in outcome.reason
    assert server.store.get("resourceclaims", "team-a", "c1") == before
    assert AuditEntry.objects.get().kube_identity["groups"] == ["oidc:gpu-team-a", "oidc:gpu-other"]


def test_local_users_and_unlisted_clusters_write_as_the_dashboard(server, stale, settings):
    server.enforce_rules = False  # the dashboard's own credentials may write here
    settings.GPUDASH_KUBE_IMPERSONATION = ("another-cluster",)
    alice = signed_in("alice", ["gpu-team-a"])
    done = release_finding(alice, stale, dry_run=False)
    assert done.outcome == DONE, done.reason
    assert list(server.subjects.seen) == [] and ("POST", REVIEWS) not in server.requests
    entry = AuditEntry.objects.get()
    assert entry.kube_identity == {"dashboard": "devcluster-user", "user": None, "groups": [], "review": None}


def test_readiness_knows_the_impersonation_rights(server, stale, settings):
    settings.OIDC_GROUP_MAP = parse_group_map("gpu-team-a=operator:team-a")
    settings.GPUDASH_KUBE_GROUPS_PREFIX = "oidc:"
    settings.GPUDASH_OPS = {**settings.GPUDASH_OPS, "RBAC_SUBJECTS": []}
    with ClusterReader(stale.cluster) as reader:
        items = {i["text"]: i["status"] for i in check_rbac(stale.cluster, reader)["items"]}
    assert items[next(t for t in items if t.startswith("Writes run as the signed-in user"))] == PASS, items
    assert not any("lacks patch" in t for t in items), items  # the dashboard needs no write rights of its own

    server.set_rules(
        READ + [{"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"]}]
    )
    with ClusterReader(stale.cluster) as reader:
        items = {i["text"]: i["status"] for i in check_rbac(stale.cluster, reader)["items"]}
    text = next(t for t in items if t.startswith("Writes run as the signed-in user"))
    assert (
        items[text] == FAIL and "create subjectaccessreviews" in text and "impersonate groups oidc:gpu-team-a" in text
    )


def _docs(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_impersonation_manifests_are_what_the_readiness_check_asks_for(server, stale, settings):
    standalone = _docs(ROOT / "deploy" / "rbac-impersonate.yaml")
    assert standalone == _docs(ROOT / "deploy" / "kubernetes" / "components" / "impersonate" / "rbac-impersonate.yaml")
    [role] = [d for d in standalone if d["kind"] == "ClusterRole"]
    assert {v for r in role["rules"] for v in r["verbs"]} == {"impersonate"}  # nothing else, and every rule is by name
    assert all(r.get("resourceNames") for r in role["rules"])
    readonly = [d for d in _docs(ROOT / "deploy" / "rbac-readonly.yaml") if d["kind"] == "ClusterRole"][0]["rules"]
    settings.OIDC_GROUP_MAP = parse_group_map("gpu-team-a=operator:team-a; gpu-admins=admin")
    settings.GPUDASH_KUBE_GROUPS_PREFIX = "oidc:"
    settings.GPUDASH_OPS = {**settings.GPUDASH_OPS, "RBAC_SUBJECTS": []}
    server.set_rules(readonly + role["rules"])
    with ClusterReader(stale.cluster) as reader:
        items = check_rbac(stale.cluster, reader)["items"]
    assert [i["status"] for i in items if i["text"].startswith("Writes run as")] == [PASS], items
    assert not [i for i in items if "ANY user" in i["text"] or "lacks patch" in i["text"]], items

    server.set_rules(readonly + [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users", "groups"]}])
    with ClusterReader(stale.cluster) as reader:
        items = check_rbac(stale.cluster, reader)["items"]
    assert [i["status"] for i in items if "ANY user" in i["text"]] == [WARN]
