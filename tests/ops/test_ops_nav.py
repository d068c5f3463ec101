"""The operations pages wired into the UI: navigation (with the stuck-claims badge), release actions on the
claim page, "why Pending?" links, and the overview and the fleet map agreeing on every count."""

import re
from collections import Counter

import pytest
from django.urls import reverse
from django.utils import timezone

from claims import stuck
from claims.models import Finding, ResourceClaim
from inventory import fleet
from inventory.models import Device
from mirror import roles
from mirror.models import Cluster
from tests.conftest import runs_previews
from tests.fleet_data import load_scenario
from tests.ui_fixtures import load_fleet, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def alpha():
    cluster = load_fleet()
    # A finding with a remedy, on the claim that is stuck deleting (ui_fixtures' own finding has none).
    now = timezone.now()
    Finding.objects.create(
        cluster=cluster,
        rule=stuck.DELETION_BLOCKED,
        namespace="team-b",
        claim_name="stuck-claim",
        claim_uid="uid-team-b-stuck-claim",
        summary="Deleting for 2h and still allocated.",
        remedy="deallocate",
        first_seen=now,
        last_seen=now,
    )
    return cluster


def login(client, name, role, namespaces=None):
    client.force_login(make_user(name, role=role, namespaces=namespaces))
    return client


def badge(body):
    match = re.search(r'<span data-region="navstuck">(.*?)</span>\s*</a>', body, re.S)
    assert match, "the navigation has a stuck-claims badge region"
    number = re.search(r'class="navbadge"[^>]*>(\d+)<', match.group(1))
    return int(number.group(1)) if number else 0


def test_navigation_reaches_the_operations_pages_with_a_stuck_badge(client, alpha):
    body = login(client, "alice", roles.VIEWER).get(reverse("inventory:overview")).content.decode()
    for name in ("ops:stuck", "ops:pending", "ops:readiness"):
        assert f'href="{reverse(name)}"' in body
    assert badge(body) == 2  # both open findings
    # The badge is its own live region, re-fetched like any other.
    fragment = client.get(reverse("claims:pod-list"), {"fragment": "navstuck"}).content.decode()
    assert 'class="navbadge"' in fragment and ">2<" in fragment
    Finding.objects.filter(rule=stuck.DELETION_BLOCKED).update(cleared_at=timezone.now())
    assert ">1<" in client.get(reverse("claims:pod-list"), {"fragment": "navstuck"}).content.decode()


def test_stuck_badge_counts_only_what_the_user_may_see(client, alpha):
    body = login(client, "bob", roles.VIEWER, namespaces=["team-a"]).get(reverse("claims:claim-list")).content.decode()
    assert badge(body) == 0  # both findings are in team-b
    assert 'class="navbadge"' not in body


def test_operator_gets_a_dry_run_release_on_the_claim_page(client, alpha):
    finding = Finding.objects.get(rule=stuck.DELETION_BLOCKED)
    login(client, "olivia", roles.OPERATOR)
    body = client.get(reverse("claims:claim-detail", args=["alpha", "team-b", "stuck-claim"])).content.decode()
    section = body[body.index('id="claim-findings"') :]
    assert "Deleting for 2h and still allocated." in section and "Deletion blocked" in section
    form = re.search(r'<form method="post" action="/stuck/release/".*?</form>', section, re.S).group(0)
    assert f'name="ids" value="{finding.id}"' in form and 'name="step" value="dry-run"' in form
    assert "disabled" not in form
    # The finding without a remedy says so instead of offering a button.
    assert "No safe automatic remedy" in section
    # ...and the page links to every finding of the claim, cleared ones included.
    link = re.search(r'href="(/stuck/\?[^"]*claim_name=stuck-claim[^"]*)"', section).group(1).replace("&amp;", "&")
    listed = client.get(link).content.decode()
    assert f'data-finding="{finding.id}"' in listed
    assert "Claim has been deleting for 2h" in listed


def test_stuck_page_filters_by_claim(client, alpha):
    login(client, "olivia", roles.OPERATOR)
    other = Finding.objects.get(rule=stuck.DELETION_BLOCKED)
    other.claim_name, other.claim_uid = "another", "uid-another"
    other.save()
    body = client.get(reverse("ops:stuck"), {"claim_name": "stuck-claim"}).content.decode()
    assert body.count("data-finding=") == 1 and f'data-finding="{other.id}"' not in body


def test_viewer_sees_why_release_is_disabled_and_is_refused(client, alpha):
    finding = Finding.objects.get(rule=stuck.DELETION_BLOCKED)
    login(client, "victor", roles.VIEWER)
    body = client.get(reverse("claims:claim-detail", args=["alpha", "team-b", "stuck-claim"])).content.decode()
    section = body[body.index('id="claim-findings"') :]
    assert re.search(r'<button type="button" disabled class="release-dry-run"', section)
    assert "Releasing needs the operator role in namespace team-b; you are viewer." in section
    assert 'action="/stuck/release/"' not in section
    resp = client.post(reverse("ops:stuck-release"), {"ids": [finding.id], "step": "dry-run"})
    assert resp.status_code == 403


def test_operator_outside_the_namespace_cannot_release(client, alpha):
    # Scoped to team-a: the team-b claim is not even visible to them.
    login(client, "oscar", roles.OPERATOR, namespaces=["team-a"])
    assert client.get(reverse("claims:claim-detail", args=["alpha", "team-b", "stuck-claim"])).status_code == 404


@runs_previews  # the checklist asks a preview worker where the claim could fit
def test_pending_pods_link_to_their_checklist(client, alpha):
    login(client, "alice", roles.VIEWER)
    pods = client.get(reverse("claims:pod-list")).content.decode()
    waiting = reverse("ops:pending-pod", args=["alpha", "team-a", "waiting-pod"])
    assert f'href="{waiting}"' in pods
    assert (
        reverse("ops:pending-pod", args=["alpha", "team-a", "train-1-pod"]) not in pods
    )  # Running: nothing to explain
    claim = client.get(reverse("claims:claim-detail", args=["alpha", "team-a", "pending-claim"])).content.decode()
    assert f'href="{waiting}"' in claim
    checklist = client.get(waiting)
    assert checklist.status_code == 200 and "waiting-pod" in checklist.content.decode()


# --- overview and fleet map agree -------------------------------------------------------------------


@pytest.fixture
def demo(settings):
    """The devcluster demo scenario loaded through the sync's apply_object, findings from the detector."""
    cluster = load_scenario(Cluster.objects.create(name="demo"))
    settings.GPUDASH_STUCK = {**stuck.DEFAULTS, **{k: 0 for k in stuck.DEFAULTS if k.endswith("_GRACE")}}
    from mirror.models import SyncState

    now = timezone.now()
    for kind in ("Node", "ResourceSlice", "ResourceClaim", "Pod"):  # "gone" rules only judge listed kinds
        SyncState.objects.create(cluster=cluster, kind=kind, status=SyncState.Status.CONNECTED, last_list_at=now)
    stuck.detect(cluster)
    assert Finding.objects.active().exists()
    return cluster


def rendered_counts(body, attr):
    return {k: int(v) for k, v in re.findall(rf'data-{attr}="(\w+)" data-count="(\d+)"', body)}


def test_overview_and_fleet_map_report_the_same_counts(client, demo):
    login(client, "alice", roles.VIEWER)
    overview = client.get(reverse("inventory:overview"), {"cluster": "demo"}).content.decode()
    fleet_map = client.get(reverse("inventory:fleet-map"), {"cluster": "demo"}).content.decode()

    # What each device's state is, computed here per device (the pages aggregate in FleetSnapshot).
    devices = fleet.states_for(Device.objects.filter(cluster=demo))
    expected = Counter(d.st.state for d in devices)
    expected_flags = Counter(f for d in devices for f in d.st.flags)

    for body in (overview, fleet_map):
        states = rendered_counts(body, "state")
        assert states == {s: expected[s] for s in fleet.STATES}
        assert sum(states.values()) == len(devices) == Device.objects.filter(cluster=demo).count()
        assert rendered_counts(body, "flag") == {f: expected_flags[f] for f in fleet.FLAGS}
    # The demo is meant to show every kind of trouble; make sure the comparison covers them.
    assert all(expected[s] for s in (fleet.ALLOCATED, fleet.STUCK, fleet.PARTIAL, fleet.UNHEALTHY, fleet.FREE)), (
        expected
    )
    # Where a flag and a state share a name the numbers differ in the demo (the XID-tainted GPU is still
    # allocated; the admin-access claim watches allocated GPUs), so mixing them up on one page would show.
    assert (
        expected_flags[fleet.TAINTED] > expected[fleet.TAINTED] and expected_flags[fleet.ADMIN] > expected[fleet.ADMIN]
    )


def test_overview_tiles_link_to_lists_of_the_same_size(client, demo):
    login(client, "alice", roles.VIEWER)
    overview = client.get(reverse("inventory:overview"), {"cluster": "demo"}).content.decode()
    for state, count in rendered_counts(overview, "state").items():
        listed = client.get(reverse("inventory:device-list"), {"cluster": "demo", "state": state}).context[
            "match_count"
        ]
        assert listed == count, state
    for flag, count in rendered_counts(overview, "flag").items():
        listed = client.get(reverse("inventory:device-list"), {"cluster": "demo", "flag": flag}).context["match_count"]
        assert listed == count, flag


def test_device_list_rejects_an_unknown_state(client, demo):
    login(client, "alice", roles.VIEWER)
    resp = client.get(reverse("inventory:device-list"), {"cluster": "demo", "state": "broken"})
    assert "Unknown state &#x27;broken&#x27;" in resp.content.decode() and resp.context["match_count"] == 0


def test_stuck_devices_come_from_the_detector_findings(demo):
    """The stuck state on both pages is driven by active findings: clear them and those devices fall back."""
    snap = fleet.FleetSnapshot([demo.id])
    stuck_before = snap.totals()["by_state"][fleet.STUCK]
    held_claims = set(ResourceClaim.objects.filter(cluster=demo, allocated=True).values_list("uid", flat=True))
    assert stuck_before and Finding.objects.active().filter(claim_uid__in=held_claims).exists()
    Finding.objects.update(cleared_at=timezone.now())
    after = fleet.FleetSnapshot([demo.id]).totals()["by_state"]
    assert (
        after[fleet.STUCK] == 0
        and after[fleet.ALLOCATED] + after[fleet.ADMIN] + after[fleet.PARTIAL]
        > snap.totals()["by_state"][fleet.ALLOCATED]
    )
