"""The verdict in one sentence, on fleets shaped like the demo (demo-mixed: CPU-only nodes,
device-plugin and HAMi nodes, a NotReady H100 node, a cordoned node without its driver, MIG A100s,
a stuck claim holding a device): the headline speaks of the nodes that could serve the request and
what blocks them now; the nodes that never could are counted apart, never as the reason."""

import copy

import pytest

from devcluster.scenario import scenario_objects
from dra import Inventory, load_documents, preview, resolve_claims
from dra.nodefilters import scheduling_pod
from dra.verdict import headline, verdict

from .remedy_fleets import build, node_case, pending

POD = """
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml-training}
spec:
  containers: [{name: c, resources: {claims: [{name: g}]}}]
  resourceClaims: [{name: g, resourceClaimTemplateName: t}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: t, namespace: ml-training}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: %s
"""
NEVER_H100 = {"cpu-01", "gpu-a100-01", "gpu-a100-02", "gpu-dp-01", "gpu-dp-mig-01", "gpu-hami-01", "gpu-l4-01"}
MIG = "{deviceClassName: mig.nvidia.com, count: %s, selectors: [{cel: {expression: \"device.attributes['gpu.nvidia.com'].profile == '%s'\"}}]}"


@pytest.fixture(scope="module")
def demo():
    return Inventory.from_objects(copy.deepcopy(scenario_objects("demo-mixed")))


def judge(inv, text, stuck=()):
    docs = load_documents(text)
    claims, bound = resolve_claims(inv, docs)
    out = preview(inv, claims, bound=bound, pod=scheduling_pod(docs))
    answer = verdict(inv, claims, out, stuck=stuck)
    return answer, headline(answer), out


def test_eight_h100s_name_the_holders_the_stuck_claim_and_the_notready_node(demo):
    answer, (sentence,), out = judge(
        demo, POD % "{deviceClassName: h100.nvidia.com, count: 8}", stuck={"ml-training/tokenizer-gpu"}
    )
    (item,) = answer["requests"]
    assert NEVER_H100 <= set(item["never"]["no-device"])
    assert sorted(item["serving"]) == ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03", "gpu-h100-04"]
    assert [n["node"] for n in item["blocked"]["allocated"]] == ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03"]
    assert [n["node"] for n in item["blocked"]["not-ready"]] == ["gpu-h100-04"]
    assert sentence.startswith("Request gpus needs 8 × NVIDIA H100 80GB HBM3 on one node: 4 nodes have 8 or more; ")
    assert "3 have too few free devices (the others allocated to ml-training/llama-pretrain-0-" in sentence
    assert "1 node has devices held by a stuck claim" in sentence
    assert sentence.endswith("gpu-h100-04 is NotReady.")
    # Nothing about the nodes that never could: no driver, no pool, no CPU-only node in the sentence.
    assert "cpu-01" not in sentence and "pool" not in sentence and "`" not in sentence
    assert answer["schedulerMessage"] == out["summary"]["schedulerMessage"]


def test_without_the_stuck_finding_no_claim_is_called_stuck(demo):
    _, (sentence,), _ = judge(demo, POD % "{deviceClassName: h100.nvidia.com, count: 8}")
    assert "stuck" not in sentence


def test_a_count_above_every_nodes_maximum_says_so_instead_of_allocated(demo):
    answer, (sentence,), _ = judge(demo, POD % "{deviceClassName: h100.nvidia.com, count: 9}")
    assert (
        sentence
        == "Request gpus needs 9 × NVIDIA H100 80GB HBM3 on one node: no node has more than 8 matching devices."
    )
    assert answer["requests"][0]["maxMatching"] == 8


def test_a_class_no_node_publishes(demo):
    inv = demo.with_changes(
        upserts={
            "device_classes": [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": "tpu.example.com"},
                    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'tpu.example.com'"}}]},
                }
            ]
        }
    )
    answer, (sentence,), _ = judge(inv, POD % "{deviceClassName: tpu.example.com, count: 1}")
    assert (
        sentence
        == "Request gpus needs 1 × tpu.example.com on one node: no node publishes a device of class tpu.example.com."
    )
    assert len(answer["requests"][0]["never"]["no-device"]) == len(inv.node_names)


def test_mig_partitions_blocked_by_shared_counters(demo):
    answer, (sentence,), _ = judge(demo, POD % (MIG % (4, "7g.80gb")))
    assert "4 × NVIDIA A100 80GB PCIe 7g.80gb" in sentence
    assert "on gpu-a100-01, gpu-a100-02 partitions already use the devices' shared counters" in sentence
    assert set(answer["requests"][0]["never"]["no-device"]) >= {"gpu-h100-01", "gpu-dp-mig-01", "cpu-01"}


def test_a_gpu_pod_that_fits_gets_no_blocker(demo):
    answer, (sentence,), _ = judge(demo, POD % "{deviceClassName: h100.nvidia.com, count: 1}")
    assert answer["fits"] and answer["requests"] == []
    assert sentence.startswith("It fits now on ")


@pytest.mark.parametrize(
    "nodes, count, expected",
    [
        (
            [node_case("a", state="cordoned", gpus=2), node_case("b", state="cpu-only")],
            2,
            "Request gpus needs 2 × a on one node: 1 node has 2 or more; a is cordoned.",
        ),
        (
            [node_case("a", gpus=2, holders=[1, 0], tainted=[1]), node_case("b", state="tainted", gpus=2)],
            2,
            "Request gpus needs 2 × a on one node: 2 nodes have 2 or more; 1 has too few free devices "
            "(the others allocated to work/a-claim-1); b has a taint the pod does not tolerate.",
        ),
        (
            [node_case("a", gpus=2, tainted=[0])],
            2,
            "Request gpus needs 2 × a on one node: 1 node has 2 or more; a has tainted devices "
            "(gpu.example.com/xid=79:NoSchedule).",
        ),
        (
            [node_case("a", gpus=1), node_case("b", state="not-ready", gpus=1)],
            2,
            "Request gpus needs 2 × a on one node: no node has more than 1 matching devices.",
        ),
    ],
)
def test_table_of_small_fleets(nodes, count, expected):
    inv, claims, pod, stuck = build(pending(count=count, nodes=nodes))
    out = preview(inv, claims, pod=pod)
    assert headline(verdict(inv, claims, out, stuck=stuck)) == [expected]
