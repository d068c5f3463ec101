"""What-if through the API, the page and `manage.py whatif`, on the preview workers: the same answer from
all three, bad input named, namespace scope as previews have it, saved and shared scenarios, and
nothing written to the mirror (let alone the cluster)."""

import html
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from claims.models import ResourceClaim, WhatIfScenario
from inventory.models import Node, ResourceSlice
from mirror import roles
from tests.api_fixtures import client_for
from tests.conftest import PREVIEW_WORKER_MARKS
from tests.ui_fixtures import make_user
from tests.whatif_fixtures import load_whatif_cluster, verdicts

pytestmark = [*PREVIEW_WORKER_MARKS, pytest.mark.sqlite_default]
API = "/api/v1/whatif"
PAGE = reverse("claims:whatif")
CLONE = ["add busy-00 2"]


@pytest.fixture
def plan():
    return load_whatif_cluster()


@pytest.fixture
def otto(plan):
    return make_user("otto", roles.OPERATOR)


def api_run(client, changes, shapes=(), status=200):
    resp = client.post(API, {"cluster": "plan", "changes": list(changes), "shapes": list(shapes)}, format="json")
    assert resp.status_code == status, resp.content[:600]
    return resp.json()


def cli_run(changes, shapes=()):
    out = io.StringIO()
    args = ["whatif", "--cluster", "plan", "--json"]
    for c in changes:
        args += ["--change", c]
    for s in shapes:
        args += ["--shape", s]
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def page_run(client, changes, shapes=(), status=200):
    query = [("cluster", "plan")] + [("c", c) for c in changes] + [("s", s) for s in shapes]
    resp = client.get(PAGE, query)
    assert resp.status_code == status, resp.content[:600]
    return resp


def test_api_page_and_cli_give_the_same_answer(plan, otto, client):
    shapes = ["2 x gpu.nvidia.com"]
    api = api_run(client_for(otto), CLONE, shapes)["result"]
    cli = cli_run(CLONE, shapes)
    client.force_login(otto)
    resp = page_run(client, CLONE, shapes)
    page = resp.context["result"]
    expected = {
        "team-a/job-two": "now-schedulable",  # 2 GPUs: each empty clone of busy-00 has 2 H100
        "team-b/job-nine": "still-blocked",  # 9 GPUs: no node, cloned or not, has 9
        "team-b/job-one": "still-schedulable",  # 1 GPU: fitted on small-00 already
        "team-a/solo": "still-schedulable",  # a claim no pod uses yet, placed for a would-be pod
    }
    assert verdicts(api) == verdicts(cli) == verdicts(page) == expected
    for result in (api, cli, page):
        entry = next(e for e in result["workloads"] if e["name"] == "job-two")
        assert entry["onNewNodes"] == ["busy-00-whatif-1", "busy-00-whatif-2"]
        assert entry["before"]["fits"] == 0 and entry["after"]["fits"] == 2
        assert result["summary"]["addedNodes"] == ["busy-00-whatif-1", "busy-00-whatif-2"]
        assert [(h["before"]["copies"], h["after"]["copies"]) for h in result["headroom"]] == [(0, 2)]
    # Capacity on the changed nodes: two empty clones of busy-00 (2 H100 each, no partitions).
    assert api["capacity"] == cli["capacity"] == page["capacity"]
    assert api["capacity"]["before"] == {"gpus": 0, "gpusFree": 0, "stranded": 0, "profiles": {}}
    assert api["capacity"]["after"] == {"gpus": 4, "gpusFree": 4, "stranded": 0, "profiles": {}}
    # What the page shows: the counts per verdict and the rows, as a user reads them (the whitespace
    # between a table's tags is not shown: the template puts each cell on its own line).
    body = resp.content.decode()
    assert (
        '<tr data-kind="gpusFree" data-profile=""><td>whole GPUs free</td><td class="num">0</td><td class="num">4</td></tr>'
        in re.sub(r">\s+<", "><", body)
    )
    assert '<b data-verdict="now-schedulable">1</b>' in body
    assert 'data-workload="team-a/job-two" data-verdict="now-schedulable"' in body
    assert "busy-00-whatif-1, busy-00-whatif-2" in body


def test_nothing_is_written(plan, otto):
    before = (
        Node.objects.count(),
        ResourceSlice.objects.count(),
        list(ResourceClaim.objects.values_list("raw", flat=True)),
    )
    api_run(client_for(otto), ["add busy-00 3", "drain busy-01", "delete team-b/holder-02", "remove small-00"])
    after = (
        Node.objects.count(),
        ResourceSlice.objects.count(),
        list(ResourceClaim.objects.values_list("raw", flat=True)),
    )
    assert before == after


def test_release_and_drain(plan, otto):
    result = api_run(client_for(otto), ["release team-b/holder-01", "drain small-00"])["result"]
    assert verdicts(result) == {
        "team-a/job-two": "now-schedulable",  # busy-01's two H100 are free
        "team-b/job-nine": "still-blocked",
        "team-b/job-one": "still-schedulable",  # small-00 drained, but busy-01 has room now
        "team-a/solo": "still-schedulable",
    }
    job_two = next(e for e in result["workloads"] if e["name"] == "job-two")
    assert job_two["after"]["nodes"] == ["busy-01"]
    cordon = api_run(client_for(otto), ["cordon small-00"])["result"]
    assert verdicts(cordon)["team-b/job-one"] == verdicts(cordon)["team-a/solo"] == "loses-place"
    solo = next(e for e in cordon["workloads"] if e["name"] == "solo")
    assert solo["kind"] == "claim" and solo["before"]["nodes"] == ["small-00"]


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        (["cordon small-00", "add gpu-nowhere 2"], "changes[1]", "unknown node 'gpu-nowhere'"),
        (["add busy-00 0"], "changes[0]", "COUNT must be a whole number from 1 to 100"),
        (["add busy-00 500"], "changes[0]", "COUNT must be a whole number from 1 to 100"),
        (["class gpu.nvidia.com device.driver =="], "changes[0]", "CEL compile error at line 1, column"),
        (["class no-such-class device.driver == 'x'"], "changes[0]", "unknown DeviceClass 'no-such-class'"),
        (["release team-b/nope"], "changes[0]", "unknown claim team-b/nope"),
        (["release team-b/wants-one"], "changes[0]", "is not allocated: nothing to release"),
        (["explode busy-00"], "changes[0]", "unknown change 'explode'"),
    ],
)
def test_bad_input_is_a_400_that_says_where(plan, otto, client, changes, field, says):
    body = api_run(client_for(otto), changes, status=400)["error"]
    assert body["field"] == field
    assert says in body["message"]
    client.force_login(otto)
    resp = page_run(client, changes, status=400)
    assert says in html.unescape(resp.content.decode())
    assert resp.context["error_index"] == int(field[-2])


def test_bad_shape_is_named(plan, otto):
    body = api_run(client_for(otto), CLONE, ["lots of gpus"], status=400)["error"]
    assert body["field"] == "shapes[0]"
    assert "COUNT x CLASS" in body["message"]


def test_namespace_scope(plan):
    scoped = make_user("ann", roles.OPERATOR, namespaces=["team-a"])
    result = api_run(client_for(scoped), ["drain busy-00"])["result"]
    assert set(verdicts(result)) == {"team-a/job-two", "team-a/solo"}  # team-b's are not shown, nor counted
    assert result["summary"]["workloads"] == 2
    # busy-00's team-b claims have no pods; the displaced list names none of another namespace.
    assert all(not d["pod"].startswith("team-b/") for d in result["displaced"])
    # A change naming another namespace's claim is refused before anything is looked up.
    for name in ("holder-00", "no-such-claim"):
        body = api_run(client_for(scoped), [f"release team-b/{name}"], status=403)["error"]
        assert "namespace team-b is outside your scope" in body["message"]
    # Viewers may not run what-ifs at all (they cost a fleet-wide engine run, as previews do).
    viewer = make_user("vic", roles.VIEWER)
    assert client_for(viewer).post(API, {"cluster": "plan", "changes": CLONE}, format="json").status_code == 403


def test_viewer_page_explains_the_role(plan, client):
    client.force_login(make_user("vic", roles.VIEWER))
    resp = client.get(PAGE, {"cluster": "plan", "c": CLONE})
    assert resp.status_code == 200
    assert "result" not in resp.context
    assert 'id="whatif-needs-operator"' in resp.content.decode()


def test_save_and_share(plan, otto, client):
    client.force_login(otto)
    resp = client.post(
        PAGE + "?cluster=plan",
        {"name": "two more", "changes": "add busy-00 2\ncordon small-00", "shapes": "2 x gpu.nvidia.com"},
    )
    assert resp.status_code == 302
    saved = WhatIfScenario.objects.get(owner=otto, name="two more")
    assert saved.changes == ["add busy-00 2", "cordon small-00"] and saved.shapes == ["2 x gpu.nvidia.com"]
    # The redirect is the shareable URL: opening it runs the scenario from the query string alone.
    shared = client.get(resp["Location"])
    assert shared.status_code == 200
    assert verdicts(shared.context["result"])["team-a/job-two"] == "now-schedulable"
    # job-one loses small-00 (cordoned) but fits on the new nodes
    assert verdicts(shared.context["result"])["team-b/job-one"] == "still-schedulable"
    assert 'id="whatif-saved-note"' in shared.content.decode()
    assert f'href="{PAGE}?{html.escape(saved.query)}"' in client.get(PAGE + "?cluster=plan").content.decode()
    # Another operator opening the shared link gets the same answer under their own scope...
    other = make_user("olga", roles.OPERATOR, namespaces=["team-a"])
    client.force_login(other)
    theirs = client.get(resp["Location"])
    assert verdicts(theirs.context["result"]) == {
        "team-a/job-two": "now-schedulable",
        "team-a/solo": "still-schedulable",
    }
    # ...but not the saved scenario itself: it is otto's.
    assert ">two more</a>" not in theirs.content.decode()  # not in her list of saved scenarios
    olga = client_for(other)
    assert olga.get("/api/v1/whatif/scenarios").json() == []
    assert olga.get(f"/api/v1/whatif/scenarios/{saved.pk}").status_code == 404
    assert olga.delete(f"/api/v1/whatif/scenarios/{saved.pk}").status_code == 404
    client.post(PAGE, {"delete": saved.pk})
    assert WhatIfScenario.objects.filter(pk=saved.pk).exists()  # olga's delete of otto's scenario does nothing


def test_scenarios_api(plan, otto):
    api = client_for(otto)
    resp = api.post("/api/v1/whatif/scenarios", {"name": "grow", "cluster": "plan", "changes": CLONE}, format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["query"] == "cluster=plan&c=add+busy-00+2"
    assert [s["name"] for s in api.get("/api/v1/whatif/scenarios").json()] == ["grow"]
    again = api.post("/api/v1/whatif/scenarios", {"name": "grow", "cluster": "plan", "changes": CLONE}, format="json")
    assert again.status_code == 400 and again.json()["error"]["field"] == "name"
    bad = api.post(
        "/api/v1/whatif/scenarios", {"name": "bad", "cluster": "plan", "changes": ["add busy-00 x"]}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "changes[0]"
    # A PATCH changes only what it sends: the rest stays as saved (an empty one changes nothing).
    url = f"/api/v1/whatif/scenarios/{body['id']}"
    assert api.patch(url, {}, format="json").json()["query"] == "cluster=plan&c=add+busy-00+2"
    renamed = api.patch(url, {"name": "grow more"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "grow more"
    assert renamed.json()["changes"] == CLONE
    worse = api.patch(url, {"changes": ["add busy-00 x"]}, format="json")
    assert worse.status_code == 400 and worse.json()["error"]["field"] == "changes[0]"
    assert api.delete(url).status_code == 204


def test_cli_errors(plan):
    with pytest.raises(CommandError, match="unknown node 'nope'"):
        cli_run(["add nope 1"])
    out = io.StringIO()
    call_command("whatif", "--cluster", "plan", "--change", CLONE[0], stdout=out)
    text = out.getvalue()
    assert "now-schedulable" in text and "team-a/job-two" in text and "busy-00-whatif-1" in text
