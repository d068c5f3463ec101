"""The UI's former dead ends and its one timestamp style, with the Django test client: the audit log
page and its filters (scoped like the API), the Django admin for the admin role, the API docs and
audit log in the navigation, the only cluster preselected on the preview, relative times with the
UTC time on hover, the claim timeline dated by the claim's own timestamps, demo churn born now."""

import datetime
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from claims.models import AuditEntry, ClaimStateChange
from devcluster.churn import CHURN_NAMESPACE, Churn
from devcluster.scenario import load_scenario
from devcluster.store import Store
from mirror import roles
from mirror.models import Cluster
from mirror.sync.apply import apply_object
from mirror.templatetags.gpudash_ui import ago, ago_text, utc
from tests.ui_fixtures import claim, load_fleet, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]


@pytest.fixture
def alpha():
    return load_fleet()


def _audit(cluster, username, namespace, action="remove-reservation", outcome="done", dry_run=False):
    return AuditEntry.objects.create(
        cluster=cluster,
        cluster_name=cluster.name,
        username=username,
        namespace=namespace,
        claim_name=f"claim-{namespace}",
        action=action,
        outcome=outcome,
        dry_run=dry_run,
        request={"method": "PATCH", "path": f"/apis/resource.k8s.io/v1/namespaces/{namespace}/x"},
    )


def _rows(resp):
    return re.findall(r'<tr id="audit-(\d+)"', resp.content.decode())


def test_audit_log_page_filters_by_user_cluster_action_and_outcome(client, alpha):
    beta = Cluster.objects.create(name="beta")
    a = _audit(alpha, "olivia", "team-a")
    b = _audit(alpha, "oscar", "team-b", action="remove-finalizers", outcome="refused")
    c = _audit(beta, "olivia", "team-a", outcome="dry-run", dry_run=True)
    client.force_login(make_user("ada", role=roles.ADMIN))
    url = reverse("ops:audit")

    resp = client.get(url, {"cluster": "all"})
    assert resp.status_code == 200 and sorted(_rows(resp)) == sorted(str(e.id) for e in (a, b, c))
    assert "PATCH" in resp.content.decode()  # the exact request, behind "show"
    assert _rows(client.get(url, {"username": "olivia"})) == [str(c.id), str(a.id)]  # newest first
    assert _rows(client.get(url, {"action": "remove-finalizers"})) == [str(b.id)]
    assert _rows(client.get(url, {"outcome": "dry-run"})) == [str(c.id)]
    assert _rows(client.get(url, {"cluster": "beta"})) == [str(c.id)]
    assert _rows(client.get(url, {"cluster": "alpha", "username": "olivia"})) == [str(a.id)]
    resp = client.get(url, {"cluster": "all", "since": "not a time"})
    assert resp.status_code == 200 and _rows(resp) == [] and 'id="audit-errors"' in resp.content.decode()


def test_audit_log_page_is_scoped_to_the_users_namespaces(client, alpha):
    mine = _audit(alpha, "olivia", "team-a")
    _audit(alpha, "oscar", "team-b")
    client.force_login(make_user("bob", namespaces=["team-a"]))
    resp = client.get(reverse("ops:audit"), {"cluster": "all"})
    assert _rows(resp) == [str(mine.id)]
    assert "oscar" not in resp.content.decode()  # not even in the user filter's choices


def test_navigation_links_audit_log_and_api_docs_and_marks_the_current_page(client, alpha):
    client.force_login(make_user("alice"))
    body = client.get(reverse("ops:audit")).content.decode()
    assert f'href="{reverse("api-docs")}"' in body
    assert re.search(rf'<a href="{reverse("ops:audit")}" class="on" aria-current="page">', body)
    assert body.count('aria-current="page"') == 1
    assert 'class="skiplink" href="#main"' in body and '<main id="main"' in body
    stuck = client.get(reverse("ops:stuck")).content.decode()
    assert f'href="{reverse("ops:audit")}">Full audit log' in stuck and "/api/v1/audit/" not in stuck


def test_admin_role_can_use_the_django_admin(client, alpha):
    admin_user = make_user("root", role=roles.ADMIN)
    assert not admin_user.is_staff and not admin_user.is_superuser  # a role, nothing else
    client.force_login(admin_user)
    index = client.get("/admin/")
    assert index.status_code == 200
    body = index.content.decode()
    assert "permission to view or edit anything" not in body
    for model in ("mirror/cluster", "auth/user", "mirror/accessprofile"):
        assert f"/admin/{model}/" in body, model
    assert client.get("/admin/mirror/cluster/add/").status_code == 200
    assert client.get("/admin/claims/auditentry/").status_code == 200
    assert client.get("/admin/claims/auditentry/add/").status_code == 403  # the audit log stays read-only


def test_viewers_and_operators_do_not_get_the_admin(client, alpha):
    for name, role in (("vic", roles.VIEWER), ("olga", roles.OPERATOR)):
        client.force_login(make_user(name, role=role))
        assert client.get("/admin/").status_code == 302, role  # to the admin's login page


def test_preview_preselects_the_only_cluster(client, alpha):
    client.force_login(make_user("olivia", role=roles.OPERATOR))
    resp = client.get(reverse("claims:preview"), {"cluster": "all"})
    assert resp.context["cluster"] == alpha
    assert re.search(r'<button type="submit" id="pv-run">', resp.content.decode())  # not disabled
    assert client.session["gpudash.cluster"] == "all"  # the other pages keep "All clusters"
    Cluster.objects.create(name="beta")
    resp = client.get(reverse("claims:preview"), {"cluster": "all"})
    assert resp.context["cluster"] is None and 'id="pv-run" disabled' in resp.content.decode()


def test_one_timestamp_style():
    now = timezone.now()
    at = now - datetime.timedelta(minutes=5, seconds=3)
    html = str(ago(at))
    iso = at.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    assert html == f'<time datetime="{iso}" title="{at:%Y-%m-%d %H:%M:%S} UTC">5m ago</time>'
    assert ago_text(now - datetime.timedelta(days=3, hours=5)) == "3d ago"
    assert ago_text(now + datetime.timedelta(minutes=10, seconds=5)) == "in 10m"
    assert ago_text(now) == "just now"
    assert ago_text("2026-01-05T09:30:00Z") == ago_text(datetime.datetime(2026, 1, 5, 9, 30, tzinfo=datetime.UTC))
    assert utc("2026-01-05T09:30:00Z") == "2026-01-05 09:30:00 UTC"
    assert ago(None) == ago_text("not a time") == utc(None) == "—"


def test_claim_timeline_uses_the_claims_own_timestamps(alpha):
    raw = claim("team-a", "dated")
    raw["metadata"]["creationTimestamp"] = "2026-01-05T09:00:00Z"
    apply_object(alpha, "ResourceClaim", raw)
    raw = {
        **raw,
        "metadata": {
            **raw["metadata"],
            "resourceVersion": str(int(raw["metadata"]["resourceVersion"]) + 1),
            "deletionTimestamp": "2026-01-05T09:30:00Z",
            "finalizers": ["resource.kubernetes.io/delete-protection"],
        },
    }
    apply_object(alpha, "ResourceClaim", raw)
    steps = list(
        ClaimStateChange.objects.filter(cluster=alpha, name="dated").order_by("at").values_list("new_state", "at")
    )
    assert steps == [
        ("pending", datetime.datetime(2026, 1, 5, 9, 0, tzinfo=datetime.UTC)),
        ("deleting", datetime.datetime(2026, 1, 5, 9, 30, tzinfo=datetime.UTC)),
    ]


def test_demo_churn_claims_are_born_now():
    store = Store()
    load_scenario(store, "demo")
    churn = Churn(store, seed=5)
    before = timezone.now() - datetime.timedelta(seconds=2)
    for _ in range(6):
        churn.step()
    mine = [c for c in store.list("resourceclaims") if c["metadata"]["namespace"] == CHURN_NAMESPACE]
    assert mine, "the churn created claims"
    for c in mine:
        created = datetime.datetime.fromisoformat(c["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        assert created >= before.replace(microsecond=0), c["metadata"]["name"]
        allocated = ((c.get("status") or {}).get("allocation") or {}).get("allocationTimestamp")
        if allocated:
            assert datetime.datetime.fromisoformat(allocated.replace("Z", "+00:00")) >= before.replace(microsecond=0)
