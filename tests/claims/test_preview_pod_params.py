"""The would-be pod of a bare claim or template (issue 9): tolerations, a node selector and turning the
node filters off, given to `POST /api/v1/preview` (`tolerations`, `nodeSelector`, `nodeFilters`),
`manage.py preview` (`--toleration`, `--node-selector`, `--no-node-filters`, snapshot and database) and
the preview page (`tolerations`, `node_selector`, `skip_node_filters`). All three reach the same verdict.

Fleet "pods" (through the sync's write path): two free H100s on each node;
  gpu-a   pool a, tainted nvidia.com/gpu=present:NoSchedule
  gpu-b   pool b, no taint
  gpu-c   pool a, cordoned
"""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from claims.preview import run_preview
from mirror import roles
from mirror.models import Cluster
from mirror.sync.apply import apply_object
from tests.conftest import PREVIEW_WORKER_MARKS
from tests.preview_fixtures import GPU_CLASS, H100, TWO_GPUS, pool_node
from tests.ui_fixtures import device_class, gpu, make_user, resource_slice

pytestmark = [*PREVIEW_WORKER_MARKS, pytest.mark.sqlite_default]

TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
POD_YAML = (
    """apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: team-a}
spec:
  containers: [{name: main, image: cuda, resources: {claims: [{name: gpus}]}}]
  resourceClaims: [{name: gpus, resourceClaimName: two-gpus}]
---
"""
    + TWO_GPUS
)


def fleet_objects():
    yield "DeviceClass", device_class(GPU_CLASS, "device.driver == 'gpu.nvidia.com'")
    for name, pool in (("gpu-a", "a"), ("gpu-b", "b"), ("gpu-c", "a")):
        node = pool_node(name, pool)
        if name == "gpu-a":
            node["spec"]["taints"] = [TAINT]
        if name == "gpu-c":
            node["spec"]["unschedulable"] = True
        yield "Node", node
        yield "ResourceSlice", resource_slice(name, [gpu("gpu-0", H100), gpu("gpu-1", H100)])


@pytest.fixture
def pods_cluster():
    cluster = Cluster.objects.create(name="pods")
    for kind, raw in fleet_objects():
        apply_object(cluster, kind, raw)
    return cluster


def verdicts(result):
    return {e["node"]: (e["fits"], e["reason"]) for e in result["nodes"]}


TAINTED = "TaintToleration: node(s) had untolerated taint(s)"
CORDONED = "NodeUnschedulable: node(s) were unschedulable"
OTHER_POOL = "NodeAffinity: node(s) didn't match Pod's node affinity/selector"

# (tolerations, nodeSelector, nodeFilters) -> expected verdict per node (fits, reason)
CASES = [
    (None, None, True, {"gpu-a": (False, TAINTED), "gpu-b": (True, None), "gpu-c": (False, CORDONED)}),
    (
        [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        None,
        True,
        {"gpu-a": (True, None), "gpu-b": (True, None), "gpu-c": (False, CORDONED)},
    ),
    (
        [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        {"gpudash.io/node-pool": "a"},
        True,
        {"gpu-a": (True, None), "gpu-b": (False, OTHER_POOL), "gpu-c": (False, CORDONED)},
    ),
    (None, None, False, {"gpu-a": (True, None), "gpu-b": (True, None), "gpu-c": (True, None)}),
]


@pytest.mark.parametrize("tolerations, selector, filters, expected", CASES)
def test_api_would_be_pod_params(pods_cluster, tolerations, selector, filters, expected):
    api = APIClient()
    api.force_authenticate(make_user("ops", role=roles.OPERATOR))
    body = {"cluster": "pods", "namespace": "team-a", "yaml": TWO_GPUS, "nodeFilters": filters}
    if tolerations is not None:
        body["tolerations"] = tolerations
    if selector is not None:
        body["nodeSelector"] = selector
    r = api.post("/api/v1/preview", body, format="json")
    assert r.status_code == 200, r.content
    result = r.json()["result"]
    assert verdicts(result) == expected
    summary = result["summary"]
    assert summary["nodeFilters"]["enabled"] is filters
    if filters:
        pod = summary["nodeFilters"]["pod"]
        assert pod["nodeSelector"] == (selector or {})
        assert [t for t in pod["tolerations"] if t["key"] == "nvidia.com/gpu"] == (
            [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": ""}] if tolerations else []
        )
        # Each node's filters, in the scheduler's order, end at the rejecting one or with DynamicResources.
        for entry in result["nodes"]:
            assert entry["filters"][-1]["plugin"] == (entry["reason"] or "DynamicResources:").split(":")[0]
    else:
        assert all(
            e["filters"] == [{"plugin": "DynamicResources", "passed": True, "reason": None, "reasons": []}]
            for e in result["nodes"]
        )
    # The same verdict as the Django adapter the page and the command use.
    assert (
        verdicts(
            run_preview(
                pods_cluster,
                yaml_text=TWO_GPUS,
                namespace="team-a",
                tolerations=tolerations,
                node_selector=selector,
                node_filters=filters,
            )
        )
        == expected
    )


def test_api_node_selector_as_text_and_bad_params_name_their_field(pods_cluster):
    api = APIClient()
    api.force_authenticate(make_user("ops", role=roles.OPERATOR))
    body = {"cluster": "pods", "namespace": "team-a", "yaml": TWO_GPUS}
    r = api.post("/api/v1/preview", {**body, "nodeSelector": "gpudash.io/node-pool=b"}, format="json")
    assert r.status_code == 200, r.content
    assert verdicts(r.json()["result"])["gpu-b"] == (True, None)
    assert verdicts(r.json()["result"])["gpu-a"] == (False, TAINTED)  # NodeAffinity comes after TaintToleration
    for params, field, text in (
        (
            {"tolerations": [{"key": "x", "operator": "Sometimes"}]},
            "tolerations",
            "tolerations[0].operator: must be Exists or Equal",
        ),
        ({"tolerations": {"key": "x"}}, "tolerations", "tolerations: must be a list"),
        ({"nodeSelector": {"bad key!": "a"}}, "nodeSelector", "is not a valid label key"),
        ({"nodeSelector": "pool"}, "nodeSelector", "must be KEY=VALUE"),
        ({"nodeFilters": "sometimes"}, "nodeFilters", ""),
    ):
        r = api.post("/api/v1/preview", {**body, **params}, format="json")
        assert r.status_code == 400, (params, r.content)
        err = r.json()["error"]
        assert err["field"] == field and text in err["message"], (params, err)
    # A Pod brings its own tolerations: giving both is refused, naming why.
    r = api.post("/api/v1/preview", {**body, "yaml": POD_YAML, "tolerations": [{"operator": "Exists"}]}, format="json")
    assert r.status_code == 400 and "only for bare claims and templates" in r.json()["error"]["message"]


def run_command(**opts):
    out = io.StringIO()
    call_command("preview", stdout=out, **opts)
    return out.getvalue()


@pytest.fixture
def claim_file(tmp_path):
    path = tmp_path / "claim.yaml"
    path.write_text(TWO_GPUS)
    return path


@pytest.fixture
def dump_file(tmp_path):
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [raw for _, raw in fleet_objects()]}))
    return path


COMMAND_FLAGS = [
    ({}, CASES[0][3]),
    ({"tolerations": ["nvidia.com/gpu=present:NoSchedule"]}, CASES[1][3]),
    ({"tolerations": ["nvidia.com/gpu:NoSchedule"], "node_selector": ["gpudash.io/node-pool=a"]}, CASES[2][3]),
    ({"no_node_filters": True}, CASES[3][3]),
]


@pytest.mark.parametrize("flags, expected", COMMAND_FLAGS)
def test_command_flags_from_the_database_and_a_snapshot(pods_cluster, claim_file, dump_file, flags, expected):
    from_db = json.loads(run_command(claim=str(claim_file), cluster="pods", json=True, **flags))
    assert verdicts(from_db) == expected
    from_dump = json.loads(run_command(claim=str(claim_file), snapshot=str(dump_file), json=True, **flags))
    assert verdicts(from_dump) == expected
    assert from_db["summary"]["nodeFilters"]["enabled"] is not flags.get("no_node_filters", False)


def test_command_flags_in_the_table_and_bad_flags(pods_cluster, claim_file):
    table = run_command(claim=str(claim_file), cluster="pods", tolerations=["*"])
    # `*` (empty key, Exists) tolerates every taint, the cordon's node.kubernetes.io/unschedulable too (as upstream).
    assert "gpu-a: fits" in table and "gpu-c: fits" in table and "3 of 3 nodes fit" in table
    table = run_command(claim=str(claim_file), cluster="pods", tolerations=["nvidia.com/gpu"])
    assert "gpu-a: fits" in table and f"gpu-c: no    {CORDONED}" in table
    with pytest.raises(CommandError, match="spec.tolerations|tolerations"):
        run_command(claim=str(claim_file), cluster="pods", tolerations=["=x"])
    with pytest.raises(CommandError, match="must be KEY=VALUE"):
        run_command(claim=str(claim_file), cluster="pods", node_selector=["pool"])


PAGE = reverse("claims:preview") + "?cluster=pods"


@pytest.fixture
def operator(client, pods_cluster):
    client.force_login(make_user("olga", role=roles.OPERATOR))
    return client


def page(client, **fields):
    resp = client.post(PAGE, {"yaml": TWO_GPUS, "namespace": "team-a", **fields})
    assert resp.status_code == 200, resp.content[:500]
    return resp


def page_verdicts(resp):
    """Every node's verdict as the page lists it: the fitting nodes, then each failing group (all on
    their first page in this small cluster)."""
    report = resp.context["report"]
    rows = [*report.fits.rows, *(row for group in report.groups for row in group.rows)]
    assert len(rows) == report.total
    return {e["node"]: (e["fits"], e["reason"]) for e in rows}


def test_page_fields_reach_the_engine_and_stay_in_the_form(operator):
    plain = page(operator)
    assert page_verdicts(plain) == CASES[0][3]
    body = plain.content.decode()
    assert '<details class="pv-podfields">' in body  # closed while no field is used

    tolerant = page(operator, tolerations="nvidia.com/gpu=present:NoSchedule", node_selector="gpudash.io/node-pool=a")
    assert page_verdicts(tolerant) == CASES[2][3]
    body = tolerant.content.decode()
    assert '<details class="pv-podfields" open>' in body
    assert 'value="nvidia.com/gpu=present:NoSchedule"' in body and 'value="gpudash.io/node-pool=a"' in body
    # A pending claim's "run again" link keeps the fields.
    assert "tolerations=nvidia.com%2Fgpu%3Dpresent%3ANoSchedule" in tolerant.context["rerun_query"]
    assert "node_selector=gpudash.io%2Fnode-pool%3Da" in tolerant.context["rerun_query"]

    off = page(operator, skip_node_filters="1")
    assert page_verdicts(off) == CASES[3][3]
    assert 'name="skip_node_filters" value="1" checked' in off.content.decode()
    assert off.context["outcome"]["summary"]["nodeFilters"] == {"enabled": False}


def test_page_bad_fields_are_an_error_naming_the_would_be_pod(operator):
    resp = page(operator, tolerations="nvidia.com/gpu=present:Sometimes")
    assert "report" not in resp.context
    assert (
        resp.context["error"]
        == "tolerations[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute, not 'Sometimes'"
    )
    resp = page(operator, node_selector="no-equals-sign")
    assert resp.context["error"] == "Would-be pod: node selector: 'no-equals-sign' must be KEY=VALUE"
