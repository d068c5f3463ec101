"""The Pending explainer and the claim page lead with the answer, then the remedies the engine
verified, then the evidence (issue 33): on the demo fleet in the database, the pages through Django's
test client, previews on the session's preview workers."""

import copy
import re

import pytest
from django.utils import timezone

from claims import stuck
from claims.models import Finding, ResourceClaim
from mirror import roles
from mirror.models import Cluster
from tests.conftest import PREVIEW_WORKER_MARKS
from tests.fleet_data import apply_object, load_scenario, make_user

pytestmark = PREVIEW_WORKER_MARKS


@pytest.fixture
def demo(db):
    cluster = load_scenario(Cluster.objects.create(name="demo"))
    stuck.detect(cluster)  # the unallocatable llama claim, explained by the engine
    spare_finding(cluster)
    return cluster


def spare_finding(cluster):
    """l4-warm-spare is allocated with nobody reserved: a finding once its grace period passed."""
    spare = ResourceClaim.objects.get(cluster=cluster, namespace="inference", name="l4-warm-spare")
    now = timezone.now()
    return Finding.objects.create(
        cluster=cluster,
        rule=stuck.ORPHANED_ALLOCATION,
        namespace="inference",
        claim_name="l4-warm-spare",
        claim_uid=spare.uid,
        summary="Allocated with an empty reservedFor and no live pod referencing it.",
        remedy="deallocate",
        first_seen=now,
        last_seen=now,
    )


def pending_l4_trio(cluster):
    """A pod asking for 3 L4s on one node: gpu-l4-01 has 2 free, and l4-warm-spare (allocated, no
    consumer: a stuck finding) holds the third."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "trio", "namespace": "inference", "uid": "uid-trio", "resourceVersion": "1"},
        "spec": {
            "devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "l4.nvidia.com", "count": 3}}]}
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "l4-trio", "namespace": "inference", "uid": "uid-l4-trio", "resourceVersion": "1"},
        "spec": {
            "containers": [{"name": "c", "resources": {"claims": [{"name": "gpus"}]}}],
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "trio"}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/10 nodes are available: 1 node(s) had untolerated taint(s), "
                    "1 node(s) were unschedulable, 8 cannot allocate all claims.",
                }
            ],
        },
    }
    apply_object(cluster, "ResourceClaim", copy.deepcopy(claim))
    apply_object(cluster, "Pod", copy.deepcopy(pod))


def page(client, user, *args):
    client.force_login(user)
    body = client.get(f"/pending/{'/'.join(args)}/").content.decode()
    start = body.index('id="pending-report"')
    return body[start : body.index('id="pending-pods"')]


def text_of(html):
    html = re.sub(r"</?(b|q|a|span)\b[^>]*>", "", html)  # inline: no space of their own
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#x27;", "'").replace("&quot;", '"')


def test_answer_then_remedies_then_evidence_with_the_release_dry_run(client, demo):
    pending_l4_trio(demo)
    spare = Finding.objects.stuck().filter(cluster=demo, claim_name="l4-warm-spare").exclude(remedy="").get()
    report = page(client, make_user("olivia", role=roles.OPERATOR), "demo", "inference", "l4-trio")
    answer, remedies, evidence = (report.index(f'id="{i}"') for i in ("answer", "remedies", "evidence"))
    assert answer < remedies < evidence
    shown = text_of(report)
    assert (
        "Why it is Pending: Request gpus needs 3 × NVIDIA L4 on one node: 2 nodes have 3 or more; "
        "2 have too few free devices (the others allocated to inference/llm-serve-0-gpu-" in shown
    )
    assert "1 node has devices held by a stuck claim" in shown
    assert shown.count("Request gpus needs 3 × NVIDIA L4") == 1  # the answer; the evidence does not repeat it
    # The scheduler's message once, verbatim, labelled; no markdown; no run-together sentences.
    assert shown.count("8 cannot allocate all claims.") == 1
    assert "The scheduler's message, verbatim:" in shown
    assert "`" not in shown and not re.search(r"[a-z]Scheduler:", shown)
    # The release remedy names the claim and where the pod lands, and links to the dry run.
    release = re.search(r'<li class="remedy remedy-release-stuck">.*?</li>', report, re.S).group(0)
    assert "inference/l4-warm-spare" in release
    assert "It would fit on gpu-l4-01 (devices gpu-0, gpu-1, gpu-2)." not in text_of(release)  # gpu-0 is in use
    assert re.search(r"It would fit on gpu-l4-01 \(devices gpu-\d, gpu-\d, gpu-\d\)\.", text_of(release))
    form = re.search(r'<form method="post" action="/stuck/release/".*?</form>', release, re.S).group(0)
    assert f'name="ids" value="{spare.id}"' in form and 'name="step" value="dry-run"' in form
    # A viewer sees the same remedy without the release button.
    viewer = page(client, make_user("vera", role=roles.VIEWER), "demo", "inference", "l4-trio")
    assert "remedy-release-stuck" in viewer and "/stuck/release/" not in viewer


def test_the_chinese_page_says_the_answer_in_chinese(client, demo):
    pending_l4_trio(demo)
    client.force_login(make_user("olivia", role=roles.OPERATOR))
    body = client.get("/pending/demo/inference/l4-trio/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    shown = text_of(body)
    assert "为何处于 Pending" in shown and "需要单个节点上的 3 × NVIDIA L4" in shown
    assert "怎样才能容纳" in shown and "释放卡住的声明" in shown and "证据" in shown


def test_a_running_pod_says_it_is_running_and_other_drivers_are_evidence(client, demo):
    report = page(client, make_user("vera", role=roles.VIEWER), "demo", "ml-training", "llama-pretrain-0")
    verdict = re.search(r'<p class="finding verdict-(\w+)" id="verdict">(.*?)</p>', report, re.S)
    assert verdict.group(1) == "running"
    assert text_of(verdict.group(2)).startswith("Running: The pod is running on gpu-h100-01.")
    assert "No DRA problem found" not in report and "rdma" not in text_of(verdict.group(2))
    assert 'id="remedies"' not in report
    # The node's RDMA checks stay in the evidence, marked as about a driver the pod does not use.
    rdma = re.findall(r'<tr class="check-\w+ unrelated">\s*<td>rdma\.example\.com', report)
    assert rdma


def test_the_claim_pages_stuck_finding_gives_the_answer_and_verified_remedies(client, demo):
    claim = ResourceClaim.objects.get(cluster=demo, namespace="ml-training", name__startswith="llama-pretrain-1-")
    finding = Finding.objects.active().get(cluster=demo, rule=stuck.UNALLOCATABLE, claim_uid=claim.uid)
    assert finding.evidence["explanation"]["verdict"]["requests"]
    client.force_login(make_user("olivia", role=roles.OPERATOR))
    body = client.get(f"/claims/demo/ml-training/{claim.name}/").content.decode()
    section = body[body.index('id="claim-findings"') :]
    section = section[: section.index("</section>")]
    shown = text_of(section)
    assert "No safe automatic remedy" not in shown
    assert "Why: Request gpus needs 8 × NVIDIA H100 80GB HBM3 on one node: 4 nodes have 8 or more;" in shown
    assert "gpu-h100-04 is NotReady." in shown
    kinds = re.findall(r'class="remedy remedy-([\w-]+)"', section)
    assert kinds[0] == "reduce-count" and "add-node" in kinds
    assert "Request gpus: count 8 → 6, the largest count that fits now. It would fit on gpu-h100-03" in shown
    assert "One more node like gpu-h100-01 would fit it." in shown


L4_TRIO_POD = """
apiVersion: v1
kind: Pod
metadata: {name: trio-pasted, namespace: inference}
spec:
  containers: [{name: c, resources: {claims: [{name: gpus}]}}]
  resourceClaims: [{name: gpus, resourceClaimTemplateName: trio}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: trio, namespace: inference}
spec: {spec: {devices: {requests: [{name: gpus, exactly: {deviceClassName: l4.nvidia.com, count: 3}}]}}}
"""


def test_the_preview_api_gives_the_verdict_and_remedies_of_a_pasted_pod(demo):
    from tests.api_fixtures import client_for

    body = {"cluster": "demo", "namespace": "inference", "yaml": L4_TRIO_POD, "remedies": True}
    result = (
        client_for(make_user("otto", role=roles.OPERATOR)).post("/api/v1/preview", body, format="json").json()["result"]
    )
    (item,) = result["verdict"]["requests"]
    assert sorted(item["serving"]) == ["gpu-l4-01", "gpu-l4-02"]
    spare = next(n for n in item["blocked"]["allocated"] if n["node"] == "gpu-l4-01")
    assert spare["stuck"] == ["inference/l4-warm-spare"]
    kinds = [r["kind"] for r in result["remedies"]]
    assert kinds[0] == "release-stuck" and "reduce-count" in kinds
    assert result["remedies"][0]["change"] == {"op": "remove-claims", "claims": ["inference/l4-warm-spare"]}
    # Without the flag, the answer is the preview alone; a viewer scoped to another namespace's pods
    # never sees claim names outside it.
    plain = client_for(make_user("otto2", role=roles.OPERATOR)).post(
        "/api/v1/preview", dict(body, remedies=False), format="json"
    )
    assert "verdict" not in plain.json()["result"] and "remedies" not in plain.json()["result"]
    scoped = client_for(make_user("sam", role=roles.OPERATOR, namespaces=["inference"])).post(
        "/api/v1/preview", body, format="json"
    )
    owners = [o for n in scoped.json()["result"]["verdict"]["requests"][0]["blocked"]["allocated"] for o in n["owners"]]
    assert owners and all(o.startswith("inference/") for o in owners)


def test_the_preview_page_shows_the_answer_and_remedies_of_a_pasted_pod(client, demo):
    client.force_login(make_user("olivia", role=roles.OPERATOR))
    body = client.post("/preview/?cluster=demo", {"yaml": L4_TRIO_POD, "namespace": "inference"}).content.decode()
    answer = re.search(r'<div class="finding verdict-fail" id="pv-answer">(.*?)</div>', body, re.S).group(1)
    assert text_of(answer).strip().startswith("Request gpus needs 3 × NVIDIA L4 on one node: 2 nodes have 3 or more;")
    remedies = body[body.index('id="pv-remedies"') :]
    assert re.findall(r'class="remedy remedy-([\w-]+)"', remedies)[0] == "release-stuck"
    assert 'action="/stuck/release/"' in remedies
