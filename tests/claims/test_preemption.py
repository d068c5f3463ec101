"""DefaultPreemption's answer in a preview (dra/preemption.py): the scheduler's second
sentence, "preemption: 0/N nodes are available: ...", and the nodes where evicting lower-priority
pods would make room. Cases built on scheduler-filters.md's worked example (five nodes: a cordoned, b
tainted, c without the selected label, d short of cpu and memory, e short of cpu). Pure engine."""

import copy

from dra import Inventory, load_documents, preview, resolve_claims
from dra.nodefilters import scheduling_pod
from dra.preemption import NOT_HELPFUL
from tests.claims.test_node_filters_preview import GPU_CLASS, bound_pod, gpus, node, pod_yaml, worked_example

SELECTOR = "  nodeSelector: {disk: ssd}"


def summary_of(objects, extra_spec=SELECTOR, requests="cpu: 500m\n          memory: 1Gi"):
    inv = Inventory.from_objects(objects)
    docs = load_documents(pod_yaml(extra_spec, requests))
    claims, bound = resolve_claims(inv, docs)
    return preview(inv, claims, bound=bound, pod=scheduling_pod(docs))["summary"]


def with_priorities(objects, **priorities):
    """The fleet with spec.priority set on the named bound pods (as admission sets it)."""
    objects = copy.deepcopy(objects)
    for pod in objects["pods"]:
        if pod["metadata"]["name"] in priorities:
            pod["spec"]["priority"] = priorities[pod["metadata"]["name"]]
    return objects


FIRST = (
    "0/5 nodes are available: 1 Insufficient memory, 1 node(s) didn't match Pod's node affinity/selector, "
    "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient cpu."
)


def test_evicting_lower_priority_pods_makes_room_so_the_scheduler_adds_no_second_sentence():
    s = summary_of(worked_example(), SELECTOR + "\n  priority: 100")
    assert s["fits"] == 0
    assert s["schedulerMessage"] == FIRST
    assert s["postFilter"]["preemption"] == {
        "eligible": True,
        "message": None,
        "undecided": None,
        "error": False,
        "candidates": [{"node": "d", "lowerPriorityPods": 1}, {"node": "e", "lowerPriorityPods": 1}],
    }


def test_a_node_where_the_victims_do_not_free_enough_counts_the_filters_reasons():
    objects = worked_example()
    objects["pods"] = [p for p in objects["pods"] if p["metadata"]["name"] != "e-load"] + [
        bound_pod("e-low", "e", cpu="300m", memory="100Mi"),
        bound_pod("e-high", "e", cpu="600m", memory="100Mi"),
    ]
    objects = with_priorities(objects, **{"d-load": 200, "e-low": 0, "e-high": 200})
    s = summary_of(objects, SELECTOR + "\n  priority: 100")
    # e: without e-low 400m are free, still short of 500m; d: its only pod outranks the preemptor.
    assert s["schedulerMessage"].endswith(
        " still not schedulable, preemption: 0/5 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod, "
        "3 Preemption is not helpful for scheduling."
    )
    assert s["postFilter"]["preemption"]["candidates"] == []


def test_dynamic_resources_still_rejecting_after_the_eviction_is_counted():
    objects = worked_example()
    objects["resourceslices"] = [
        gpus(n["metadata"]["name"], count=0 if n["metadata"]["name"] in ("d", "e") else 2) for n in objects["nodes"]
    ]
    s = summary_of(objects, SELECTOR + "\n  priority: 100")
    assert (
        s["schedulerMessage"]
        == FIRST
        + " still not schedulable, preemption: 0/5 nodes are available: 2 cannot allocate all claims, 3 Preemption is not helpful for scheduling."
    )


def test_preemption_policy_never_is_not_eligible():
    s = summary_of(worked_example(), SELECTOR + "\n  priority: 100\n  preemptionPolicy: Never")
    assert (
        s["schedulerMessage"]
        == FIRST + " still not schedulable, preemption: not eligible due to preemptionPolicy=Never."
    )
    assert s["postFilter"]["preemption"]["eligible"] is False


def test_a_request_larger_than_the_whole_node_is_unresolvable():
    # 2 cpu: more than d's and e's whole allocatable (1 cpu), so neither is tried, whatever the priorities.
    s = summary_of(worked_example(), SELECTOR + "\n  priority: 1000", requests="cpu: '2'\n          memory: 1Gi")
    assert s["schedulerMessage"].endswith(
        f" still not schedulable, preemption: 0/5 nodes are available: 5 {NOT_HELPFUL}."
    )


def test_evicting_one_of_two_pods_that_declare_the_same_host_port_frees_it():
    """The scheduler's node keeps used host ports as a set: when preemption takes the low-priority pod
    away, port 8080 counts as free although the high-priority pod declares it too, so the node is then
    rejected for its cpu, not its ports (kube-scheduler v1.36, checked against the real framework)."""
    from tests.claims.test_node_filters_preview import GPU_CLASS, node

    objects = {
        "nodes": [node("p", cpu="1", memory="8Gi")],
        "resourceslices": [gpus("p")],
        "deviceclasses": [GPU_CLASS],
        "pods": [bound_pod("high", "p", cpu="600m", ports=[8080]), bound_pod("low", "p", ports=[8080])],
    }
    objects = with_priorities(objects, high=200, low=0)
    text = pod_yaml("  priority: 100", requests="cpu: 500m\n          memory: 100Mi").replace(
        "  - name: main\n", "  - name: main\n    ports: [{containerPort: 8080, hostPort: 8080}]\n"
    )
    inv = Inventory.from_objects(objects)
    docs = load_documents(text)
    claims, bound = resolve_claims(inv, docs)
    s = preview(inv, claims, bound=bound, pod=scheduling_pod(docs))["summary"]
    assert s["schedulerMessage"] == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. "
        "still not schedulable, preemption: 0/1 nodes are available: 1 Insufficient cpu."
    )


def test_only_unresolvable_rejections_and_dra_failures_are_never_tried():
    objects = worked_example()
    objects["resourceslices"] = []  # every node that passes the filters then fails DynamicResources
    s = summary_of(objects, "  priority: 100", requests="cpu: 100m\n          memory: 100Mi")
    assert s["postFilter"]["preemption"]["message"] == f"preemption: 0/5 nodes are available: 5 {NOT_HELPFUL}."


def test_an_unknown_priority_class_leaves_the_sentence_out_and_says_why():
    s = summary_of(
        with_priorities(worked_example(), **{"d-load": 0, "e-load": 0}), SELECTOR + "\n  priorityClassName: batch-high"
    )
    assert s["schedulerMessage"] == FIRST
    assert (
        s["postFilter"]["preemption"]["message"] is None and "batch-high" in s["postFilter"]["preemption"]["undecided"]
    )
    # A system class is known: system-node-critical outranks every bound pod here.
    s = summary_of(worked_example(), SELECTOR + "\n  priorityClassName: system-node-critical")
    assert [c["node"] for c in s["postFilter"]["preemption"]["candidates"]] == ["d", "e"]


def test_pods_mirrored_without_a_priority_leave_the_sentence_undecided():
    objects = worked_example()
    inv = Inventory.from_objects(objects)
    for _key, fp in list(inv.pod_footprints.items()):
        if fp["node"] == "d":
            old = {k: v for k, v in fp.items() if k != "priority"}  # a footprint an older version stored
            inv.upsert_pod(old)
    docs = load_documents(pod_yaml(SELECTOR + "\n  priority: 100"))
    claims, bound = resolve_claims(inv, docs)
    s = preview(inv, claims, bound=bound, pod=scheduling_pod(docs))["summary"]
    # e is still a candidate, so the scheduler would preempt there whatever d holds.
    assert [c["node"] for c in s["postFilter"]["preemption"]["candidates"]] == ["e"]
    objects = with_priorities(objects, **{"e-load": 500})
    inv = Inventory.from_objects(objects)
    for _key, fp in list(inv.pod_footprints.items()):
        if fp["node"] == "d":
            inv.upsert_pod({k: v for k, v in fp.items() if k != "priority"})
    s = preview(inv, claims, bound=bound, pod=scheduling_pod(docs))["summary"]
    assert (
        s["postFilter"]["preemption"]["message"] is None
        and "priority gpudash has not read yet" in s["postFilter"]["preemption"]["undecided"]
    )
    assert s["schedulerMessage"] == FIRST


def test_a_prefilter_cut_leaves_the_cut_nodes_unresolvable():
    # Only node x is left by NodeAffinity's PreFilter; it does not exist, so all five are cut (none tried).
    spec = (
        "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
        "        - matchFields: [{key: metadata.name, operator: In, values: [x]}]\n  priority: 100"
    )
    s = summary_of(worked_example(), spec)
    assert s["schedulerMessage"].endswith(
        f". still not schedulable, preemption: 0/5 nodes are available: 5 {NOT_HELPFUL}."
    )


def test_a_prefilter_rejection_leaves_dynamic_resources_postfilter_without_state():
    """Two matchFields terms that no node name satisfies together: NodeAffinity's PreFilter rejects the
    pod, DynamicResources' PreFilter never runs, and its PostFilter (the first) fails with "not found",
    which ends the PostFilters: no preemption sentence even for a pod that could evict (kube-scheduler v1.36)."""
    spec = (
        "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
        "        - matchFields: [{key: metadata.name, operator: In, values: [d]}, {key: metadata.name, operator: In, values: [e]}]\n"
        "  priority: 1000"
    )
    s = summary_of(worked_example(), spec)
    assert s["schedulerMessage"] == "0/5 nodes are available: pod affinity terms conflict. not found"
    assert s["postFilter"] == {
        "message": "not found",
        "dynamicResources": {"message": "not found", "deallocates": []},
        "preemption": None,
        "undecided": None,
    }


def test_an_allocated_claim_unavailable_on_a_checked_node_is_deallocated_first():
    """DynamicResources' PostFilter: the pod's allocated claim (reserved by nobody) is not usable on the
    nodes that passed the filters, so the scheduler deallocates it before trying preemption."""
    objects = worked_example()
    objects["resourceclaims"] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "a", "device": "gpu-0"}]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
                        ]
                    },
                }
            },
        }
    ]
    pod = pod_yaml(
        "  resourceClaims: [{name: shared, resourceClaimName: shared}]", requests="cpu: 100m\n          memory: 100Mi"
    )
    inv = Inventory.from_objects(objects)
    docs = load_documents(pod)
    claims, bound = resolve_claims(inv, docs)
    s = preview(inv, claims, bound=bound, pod=scheduling_pod(docs))["summary"]
    assert s["postFilter"]["dynamicResources"] == {
        "message": "deallocation of ResourceClaim completed",
        "deallocates": ["ml/shared"],
    }
    assert "resourceclaim not available on the node" in s["schedulerMessage"]
    assert s["schedulerMessage"].endswith(
        f". deallocation of ResourceClaim completed, preemption: 0/5 nodes are available: 5 {NOT_HELPFUL}."
    )
    # Reserved by another pod: not deallocated.
    objects["resourceclaims"][0]["status"]["reservedFor"] = [{"resource": "pods", "name": "other", "uid": "u-other"}]
    inv = Inventory.from_objects(objects)
    claims, bound = resolve_claims(inv, docs)
    s = preview(inv, claims, bound=bound, pod=scheduling_pod(docs))["summary"]
    assert s["postFilter"]["dynamicResources"] == {"message": "still not schedulable", "deallocates": []}


def test_a_bare_claim_preview_has_no_post_filter_text():
    inv = Inventory.from_objects(worked_example())
    docs = load_documents("""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: big, namespace: ml}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com, count: 3}}]}}
""")
    claims, bound = resolve_claims(inv, docs)
    s = preview(inv, claims)["summary"]
    assert s["fits"] == 0 and "preemption" not in s["schedulerMessage"] and "postFilter" not in s


def test_the_pending_explainer_says_what_the_scheduler_does_next():
    from claims.preview import post_filter_text

    s = summary_of(worked_example(), SELECTOR + "\n  priority: 100")
    assert post_filter_text(s) == (
        "Preemption: evicting lower-priority pods would make room on d, e; the scheduler nominates one of them."
    )
    assert post_filter_text(summary_of(worked_example())) == ""  # nobody to evict, nothing to deallocate


def test_when_every_node_was_tried_no_zero_count_is_printed():
    objects = worked_example()
    objects["nodes"] = [n for n in objects["nodes"] if n["metadata"]["name"] in ("d", "e")]
    objects["resourceslices"] = [gpus("d"), gpus("e")]
    s = summary_of(objects)
    assert s["schedulerMessage"].endswith(
        " still not schedulable, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def _pinned_claim(node_name):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": node_name, "device": "gpu-0"}]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                },
            }
        },
    }


def _pinned_claim_summary(nodes, counts):
    objects = {
        "nodes": nodes,
        "resourceslices": [gpus(n["metadata"]["name"], count=c) for n, c in zip(nodes, counts)],
        "deviceclasses": [GPU_CLASS],
        "pods": [],
        "resourceclaims": [_pinned_claim("z")],
    }
    inv = Inventory.from_objects(objects)
    docs = load_documents(
        pod_yaml(
            "  resourceClaims: [{name: shared, resourceClaimName: shared}]",
            requests="cpu: 100m\n          memory: 100Mi",
        )
    )
    claims, bound = resolve_claims(inv, docs)
    return preview(inv, claims, bound=bound, pod=scheduling_pod(docs))["summary"]


def test_a_failed_allocation_wins_over_an_allocated_claim_unavailable_on_the_node():
    """DynamicResources allocates the pod's other claims (here its example.com/gpu) before it reports an
    allocated claim pinned elsewhere: x has no GPU left, so it says "cannot allocate all claims"; only y,
    where the allocation succeeds, says "resourceclaim not available on the node" (kube-scheduler v1.36,
    checked against the real framework)."""
    s = _pinned_claim_summary([node("x"), node("y"), node("z", cordoned=True)], [0, 1, 1])
    assert s["schedulerMessage"] == (
        "0/3 nodes are available: 1 cannot allocate all claims, 1 node(s) were unschedulable, 1 resourceclaim not available on the node. "
        f"deallocation of ResourceClaim completed, preemption: 0/3 nodes are available: 3 {NOT_HELPFUL}."
    )


def test_an_allocated_claim_is_not_deallocated_where_the_other_claims_never_fit():
    # No node got as far as reporting the pinned claim unavailable, so DynamicResources' PostFilter has nothing to free.
    s = _pinned_claim_summary([node("x"), node("z", cordoned=True)], [0, 1])
    assert s["schedulerMessage"] == (
        "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) were unschedulable. "
        f"still not schedulable, preemption: 0/2 nodes are available: 2 {NOT_HELPFUL}."
    )
    assert s["postFilter"]["dynamicResources"] == {"message": "still not schedulable", "deallocates": []}


def raising_class(objects, expression='device.attributes["gpu.example.com"].model == "x"'):
    """The fleet with the GPU class's selector replaced by one that raises on devices without a model."""
    objects = copy.deepcopy(objects)
    (cls,) = objects["deviceclasses"]
    cls["spec"]["selectors"] = [{"cel": {"expression": expression}}]
    return objects


def test_a_filter_error_in_every_dry_run_is_the_preemption_answer_alone():
    # Checked against the real v1.36 scheduler: d and e pass DynamicResources' turn only once their
    # pods are evicted, and there the class selector raises. No candidate: preemption fails with the
    # (one distinct) error, and a PostFilter error is the whole PostFilter text (no "still not schedulable").
    objects = raising_class(with_priorities(worked_example(), **{"d-load": 0, "e-load": 0}))
    s = summary_of(objects, SELECTOR + "\n  priority: 100")
    error = 'running "DynamicResources" filter plugin: class gpu.example.com: selector #0: CEL runtime error: no such key: model'
    assert s["schedulerMessage"] == f"{FIRST} preemption: {error}"
    assert s["postFilter"]["message"] == f"preemption: {error}"
    assert s["postFilter"]["preemption"]["error"] is True and s["postFilter"]["undecided"] is None


def test_a_dry_run_error_on_one_node_does_not_stop_a_candidate_elsewhere():
    objects = raising_class(with_priorities(worked_example(), **{"d-load": 0, "e-load": 0}))
    e_slice = next(sl for sl in objects["resourceslices"] if sl["spec"]["nodeName"] == "e")
    for device in e_slice["spec"]["devices"]:
        device["attributes"] = {"model": {"string": "x"}}
    s = summary_of(objects, SELECTOR + "\n  priority: 100")
    assert s["schedulerMessage"] == FIRST
    assert s["postFilter"]["preemption"]["candidates"] == [{"node": "e", "lowerPriorityPods": 1}]
    assert s["postFilter"]["undecided"] is None


def test_dry_run_errors_with_different_texts_leave_the_order_undecided():
    # The scheduler aggregates the errors in the order its parallel dry runs finish.
    objects = raising_class(
        with_priorities(worked_example(), **{"d-load": 0, "e-load": 0}),
        'device.attributes["gpu.example.com"].model == "x" && device.attributes["gpu.example.com"].numa == 0',
    )
    e_slice = next(sl for sl in objects["resourceslices"] if sl["spec"]["nodeName"] == "e")
    for device in e_slice["spec"]["devices"]:
        device["attributes"] = {"model": {"string": "x"}}
    s = summary_of(objects, SELECTOR + "\n  priority: 100")
    assert s["schedulerMessage"] == FIRST
    assert "2 different errors" in s["postFilter"]["undecided"] and s["postFilter"]["preemption"]["candidates"] == []
