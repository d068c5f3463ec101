"""Every UI page with the Django test client: access, key content, filters, namespace scope, fragments."""

import html
import re

import pytest
from django.urls import reverse

from inventory import fleet
from inventory.models import Device
from mirror import roles
from tests.conftest import runs_previews
from tests.ui_fixtures import load_fleet, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]


@pytest.fixture
def alpha():
    return load_fleet()


@pytest.fixture
def viewer(client, alpha):
    client.force_login(make_user("alice"))
    return client


@pytest.fixture
def scoped(client, alpha):
    client.force_login(make_user("bob", namespaces=["team-a"]))
    return client


PAGES = [
    ("inventory:overview", ()),
    ("inventory:fleet-map", ()),
    ("inventory:node-list", ()),
    ("inventory:node-detail", ("alpha", "node-a")),
    ("inventory:device-list", ()),
    ("inventory:device-detail", ("alpha", "gpu.nvidia.com", "node-a", "gpu-0")),
    ("inventory:class-list", ()),
    ("inventory:pool-list", ()),
    ("claims:claim-list", ()),
    ("claims:claim-detail", ("alpha", "team-a", "train-1")),
    ("claims:pod-list", ()),
    ("claims:preview", ()),
]


@pytest.mark.parametrize("name,args", PAGES)
def test_pages_need_login(client, alpha, name, args):
    url = reverse(name, args=args)
    resp = client.get(url)
    assert resp.status_code == 302
    assert resp["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name,args", PAGES)
def test_every_page_renders_for_a_viewer(viewer, name, args):
    resp = viewer.get(reverse(name, args=args))
    assert resp.status_code == 200
    body = resp.content.decode()
    assert "alpha" in body  # cluster selector and connection status are on every page
    assert "data-live-scope=" in body


def test_a_user_without_role_is_refused(client, alpha):
    client.force_login(make_user("carol", role=None))
    assert client.get(reverse("inventory:overview")).status_code == 403


def test_login_page_logs_in(client, alpha):
    make_user("dave", password="s3cret-pass-word")
    assert client.get(reverse("login")).status_code == 200
    resp = client.post(reverse("login"), {"username": "dave", "password": "s3cret-pass-word"})
    assert resp.status_code == 302
    assert client.get(reverse("inventory:overview")).status_code == 200


def test_overview_counts_every_state(viewer):
    ctx = viewer.get(reverse("inventory:overview")).context
    t = ctx["totals"]
    # node-a 8 (train-1 holds 0,1; monitor admin on 0; stuck on 7), node-b 3 (1 MIG held -> full GPU partial),
    # node-c 2 (NotReady, gpu-1 tainted).
    assert t["total"] == 13
    assert t["stuck"] == 1 and t["allocated"] == 4  # gpu-0, gpu-1, gpu-7 (stuck), the MIG slice
    assert t["partial"] == 1
    assert t["tainted"] == 1 and t["unhealthy"] == 2
    assert t["free"] == 5 + 1  # node-a gpu-2..6, node-b's other MIG placement
    models = {r["model"]: r["total"] for r in ctx["by_model"]}
    assert models == {"NVIDIA H100 80GB HBM3": 8, "NVIDIA A100 80GB PCIe": 5}
    ns = {r["namespace"]: r["devices"] for r in ctx["namespaces"]}
    assert ns == {"team-a": 2, "team-b": 2}  # admin access does not count as holding


def test_overview_fragmentation(viewer):
    (frag,) = viewer.get(reverse("inventory:overview")).context["fragmentation"]
    assert frag["nodes"] == 3
    assert frag["whole_free_nodes"] == 0  # no node has every device free
    assert frag["free_devices"] == 6
    assert dict(frag["histogram"]) == {5: 1, 1: 1, 0: 1}


def test_fleet_map_colours_cells_and_filters_by_state(viewer):
    body = viewer.get(reverse("inventory:fleet-map")).content.decode()
    for state in ("s-free", "s-allocated", "s-stuck", "s-partial", "s-tainted"):
        assert f"cell {state}" in body
    resp = viewer.get(reverse("inventory:fleet-map"), {"state": "stuck"})
    nodes = [r["node"] for r in resp.context["page_obj"]]
    assert nodes == ["node-a"]
    assert "team-b/stuck-claim" in resp.content.decode()


def test_fleet_map_paginates_but_totals_cover_everything(viewer, monkeypatch):
    from inventory.views import FleetMapView

    monkeypatch.setattr(FleetMapView, "nodes_per_page", 1)
    resp = viewer.get(reverse("inventory:fleet-map"), {"page": 2})
    assert [r["node"] for r in resp.context["page_obj"]] == ["node-b"]
    assert resp.context["totals"]["total"] == 13
    assert "page 2 of 3" in resp.content.decode()


def test_node_detail_shows_devices_holders_and_slices(viewer):
    resp = viewer.get(reverse("inventory:node-detail", args=["alpha", "node-a"]))
    body = resp.content.decode()
    assert "node-a-gpu.nvidia.com-x1" in body
    assert "team-a/train-1" in body and "train-1-pod" in body
    assert "NVIDIA H100 80GB HBM3" in body
    states = {d.name: d.st.state for d in resp.context["devices"]}
    assert states["gpu-0"] == fleet.ALLOCATED and states["gpu-7"] == fleet.STUCK and states["gpu-3"] == fleet.FREE


def _listed(resp):
    return sorted((d.node_name, d.name) for d in resp.context["devices"])


def test_device_filter_by_attribute_and_capacity(viewer):
    url = reverse("inventory:device-list")
    resp = viewer.get(url, {"q": "productName = NVIDIA A100 80GB PCIe; memory >= 40Gi"})
    assert resp.status_code == 200 and not resp.context["error"]
    # The 3g.40gb slice has 40192Mi, just under 40Gi.
    assert _listed(resp) == [("node-b", "gpu-0"), ("node-c", "gpu-0"), ("node-c", "gpu-1")]
    resp = viewer.get(url, {"q": "productName = NVIDIA A100 80GB PCIe; memory >= 39Gi; type = mig"})
    assert _listed(resp) == [("node-b", "gpu-0-mig-3g40gb-9-4")]
    resp = viewer.get(url, {"q": "profile ~ 1g and node = node-b"})
    assert _listed(resp) == [("node-b", "gpu-0-mig-1g10gb-19-0")]
    resp = viewer.get(url, {"q": "gpu.nvidia.com/memory < 10Gi"})
    assert _listed(resp) == [("node-b", "gpu-0-mig-1g10gb-19-0")]


def test_device_filter_by_state_driver_and_node(viewer):
    url = reverse("inventory:device-list")
    assert _listed(viewer.get(url, {"state": "tainted"})) == [("node-c", "gpu-1")]
    assert _listed(viewer.get(url, {"state": "stuck"})) == [("node-a", "gpu-7")]
    assert len(_listed(viewer.get(url, {"node": "node-a", "state": "free"}))) == 5
    assert _listed(viewer.get(url, {"driver": "other.example.com"})) == []


@pytest.mark.parametrize(
    "q,message",
    [
        ("memory >> 4", "expected `name op value`"),
        ("nosuchattr = 1", "no device publishes"),
        ("memory >= lots", "not a quantity"),
    ],
)
def test_device_filter_errors_are_shown_not_swallowed(viewer, q, message):
    resp = viewer.get(reverse("inventory:device-list"), {"q": q})
    assert resp.status_code == 200
    assert message in resp.context["error"]
    assert resp.context["devices"] == []


def test_device_detail(viewer):
    resp = viewer.get(reverse("inventory:device-detail", args=["alpha", "gpu.nvidia.com", "node-b", "gpu-0"]))
    body = resp.content.decode()
    assert resp.context["device"].st.state == fleet.PARTIAL
    assert "gpu-0-counter-set" in body
    resp = viewer.get(reverse("inventory:device-detail", args=["alpha", "gpu.nvidia.com", "node-a", "gpu-0"]))
    assert {(r.claim.name, r.admin_access) for r in resp.context["results"]} == {("train-1", False), ("monitor", True)}
    assert (
        viewer.get(reverse("inventory:device-detail", args=["alpha", "gpu.nvidia.com", "node-a", "gpu-99"])).status_code
        == 404
    )


def test_pool_list_flags_inconsistent_pools(viewer, alpha):
    from mirror.sync.apply import apply_object
    from tests.ui_fixtures import gpu, meta

    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": meta("split-1"),
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-d",
            "pool": {"name": "split", "generation": 2, "resourceSliceCount": 2},
            "devices": [gpu("gpu-0", "X")],
        },
    }
    apply_object(alpha, "ResourceSlice", raw)
    resp = viewer.get(reverse("inventory:pool-list"), {"problems": "1"})
    rows = list(resp.context["page_obj"])
    assert [r["pool"] for r in rows] == ["split"]
    assert "incomplete: 1 of 2 slices published" in rows[0]["problems"]


def test_class_list_shows_selectors_and_matching_devices(viewer, alpha):
    from inventory.tasks import count_class_matches

    count_class_matches(alpha.id)  # what the background recount stores
    resp = viewer.get(reverse("inventory:class-list"))
    body = resp.content.decode()
    assert "mig.nvidia.com" in body and "device.attributes[&#x27;gpu.nvidia.com&#x27;].type == &#x27;mig&#x27;" in body
    counts = {c.name: (c.match_count, c.match_error) for c in resp.context["classes"]}
    assert counts == {"gpu.nvidia.com": (11, ""), "mig.nvidia.com": (2, "")}


def test_claim_list_filters(viewer):
    url = reverse("claims:claim-list")
    names = lambda resp: sorted(c.name for c in resp.context["page_obj"])  # noqa: E731
    assert names(viewer.get(url)) == ["infer", "monitor", "pending-claim", "stuck-claim", "train-1"]
    assert names(viewer.get(url, {"state": "stuck"})) == ["stuck-claim"]
    assert names(viewer.get(url, {"state": "pending"})) == ["pending-claim"]
    assert names(viewer.get(url, {"state": "deleting"})) == ["stuck-claim"]
    assert names(viewer.get(url, {"namespace": "team-b"})) == ["infer", "stuck-claim"]
    assert names(viewer.get(url, {"node": "node-b"})) == ["infer"]
    assert names(viewer.get(url, {"class": "mig.nvidia.com"})) == ["infer"]
    assert names(viewer.get(url, {"q": "train"})) == ["train-1"]


def test_claim_detail_links_devices_pods_and_timeline(viewer):
    resp = viewer.get(reverse("claims:claim-detail", args=["alpha", "team-a", "train-1"]))
    body = resp.content.decode()
    assert reverse("inventory:device-detail", args=["alpha", "gpu.nvidia.com", "node-a", "gpu-1"]) in body
    assert "train-1-pod" in body
    assert [t.new_state for t in resp.context["timeline"]] == ["pending", "allocated", "reserved"]
    assert "kind: ResourceClaim" in body  # raw YAML


def test_pending_claim_detail_explains_the_waiting_pod(viewer):
    body = viewer.get(reverse("claims:claim-detail", args=["alpha", "team-a", "pending-claim"])).content.decode()
    assert "waiting-pod" in body and "cannot allocate all claims" in body
    assert "Run a preview" in body


def test_stuck_claim_detail_shows_the_finding(viewer):
    body = viewer.get(reverse("claims:claim-detail", args=["alpha", "team-b", "stuck-claim"])).content.decode()
    assert "deleting-with-finalizer" in body and "finalizer still present" in body


def test_pods_page_links_pending_pods_to_their_claim(viewer):
    resp = viewer.get(reverse("claims:pod-list"))
    body = resp.content.decode()
    assert "Unschedulable" in body
    assert f'class="explain" href="{reverse("claims:claim-detail", args=["alpha", "team-a", "pending-claim"])}"' in body
    assert [p.name for p in viewer.get(reverse("claims:pod-list"), {"phase": "Running"}).context["pods"]] == [
        "train-1-pod"
    ]


def test_namespace_scoped_viewer_sees_only_their_claims_and_pods(scoped):
    claims = sorted(c.name for c in scoped.get(reverse("claims:claim-list")).context["page_obj"])
    assert claims == ["pending-claim", "train-1"]
    assert scoped.get(reverse("claims:claim-detail", args=["alpha", "team-b", "infer"])).status_code == 404
    pods = [p.name for p in scoped.get(reverse("claims:pod-list")).context["pods"]]
    assert sorted(pods) == ["train-1-pod", "waiting-pod"]
    # Devices stay visible (cluster-scoped), but other namespaces' claim names do not leak.
    body = scoped.get(reverse("inventory:fleet-map")).content.decode()
    assert "team-b/stuck-claim" not in body and "claim in another namespace" in body
    assert {r["namespace"] for r in scoped.get(reverse("inventory:overview")).context["namespaces"]} == {"team-a"}


def test_cluster_selection_is_remembered_and_unknown_cluster_is_404(viewer, alpha):
    from tests.ui_fixtures import load_fleet as _load

    _load("beta")
    resp = viewer.get(reverse("inventory:overview"), {"cluster": "beta"})
    assert resp.context["cluster"].name == "beta"
    assert viewer.get(reverse("inventory:overview")).context["cluster"].name == "beta"
    assert viewer.get(reverse("inventory:overview"), {"cluster": "all"}).context["totals"]["total"] == 26
    assert viewer.get(reverse("inventory:overview"), {"cluster": "nope"}).status_code == 404


def test_fragment_renders_only_the_region(viewer):
    resp = viewer.get(reverse("claims:claim-list"), {"state": "pending", "fragment": "claims"})
    body = resp.content.decode()
    assert "<html" not in body and 'id="claim-table"' in body
    assert "pending-claim" in body and "train-1" not in body  # filters apply to the fragment too
    assert viewer.get(reverse("claims:claim-list"), {"fragment": "nope"}).status_code == 404
    conn = viewer.get(reverse("inventory:overview"), {"fragment": "conn"}).content.decode()
    assert "conn-connected" in conn


def test_connection_status_reports_disconnected(viewer, alpha):
    from django.utils import timezone

    from mirror.models import SyncState

    SyncState.objects.filter(cluster=alpha).update(
        status=SyncState.Status.ERROR, last_error="connection refused", last_error_at=timezone.now()
    )
    body = viewer.get(reverse("inventory:overview"), {"fragment": "conn"}).content.decode()
    assert "conn-disconnected" in body and "connection refused" in body


def test_preview_needs_operator(viewer, alpha):
    resp = viewer.post(reverse("claims:preview") + "?cluster=alpha", {"claim": "team-a/pending-claim"})
    assert resp.status_code == 403


TWO_GPU_SPEC = "devices:\n  requests:\n  - name: gpus\n    exactly: {deviceClassName: gpu.nvidia.com, count: 2}\n"


@runs_previews
def test_preview_page_shows_fitting_nodes(client, alpha):
    """The real engine on the hand-made fleet: the page lists the nodes the engine says fit, with the
    devices it chose, and the reasons of the others (tests/claims/test_preview_view.py covers the rest)."""
    from claims.preview import run_preview

    client.force_login(make_user("olga", role=roles.OPERATOR))
    resp = client.post(reverse("claims:preview") + "?cluster=alpha", {"yaml": TWO_GPU_SPEC, "namespace": "team-a"})
    assert resp.status_code == 200
    engine = run_preview(alpha, yaml_text=TWO_GPU_SPEC, namespace="team-a")
    fitting = [n for n in engine["nodes"] if n["fits"]]
    assert fitting and [n["node"] for n in resp.context["fits"].rows] == [n["node"] for n in fitting]
    body = resp.content.decode()
    chosen = fitting[0]["results"][0]
    assert f"{chosen['driver']}/{chosen['pool']}/{chosen['device']}" in body
    misfit = next(n for n in engine["nodes"] if not n["fits"])
    row = re.search(rf'<tr data-node="{misfit["node"]}">\s*<td.*?</tr>', body, re.S).group(0)
    assert (
        html.unescape(re.sub(r"<[^>]+>", "", row)).strip().endswith(misfit["reason"].replace("`", ""))
    )  # names shown as <code>
    resp = client.post(reverse("claims:preview") + "?cluster=alpha", {"yaml": ""})
    assert "Paste a ResourceClaim" in resp.context["error"]


def test_device_rows_match_the_api_state_column(alpha):
    """The UI's state and the API's searchable `tainted` column agree on the tainted device."""
    assert list(Device.objects.filter(tainted=True).values_list("node_name", "name")) == [("node-c", "gpu-1")]
