"""The kube-scheduler's node filters (dra/nodefilters.py), table tests from the upstream
v1.36 plugin tests (tainttoleration, nodeunschedulable, nodeaffinity, nodeports, noderesources/fit)
and the component-helpers they call. Pure engine: no database."""

import pytest

from dra.errors import InputError
from dra.nodefilters import (
    REASON_AFFINITY,
    REASON_NODE_NAME,
    REASON_PORTS,
    REASON_TAINT,
    REASON_TOO_MANY_PODS,
    REASON_UNSCHEDULABLE,
    NodeFacts,
    NodeUsage,
    SchedulingPod,
    Toleration,
    parse_toleration_flag,
    parse_tolerations,
    pod_footprint,
    pod_requests,
    rejected,
    run_filters,
    with_default_tolerations,
)


def node(name="node-1", labels=None, taints=(), unschedulable=False, allocatable=None):
    raw = {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": {"taints": list(taints)}, "status": {}}
    if unschedulable:
        raw["spec"]["unschedulable"] = True
    raw["status"]["allocatable"] = (
        allocatable if allocatable is not None else {"cpu": "10", "memory": "20Gi", "pods": "32"}
    )
    return NodeFacts(raw)


def pod(**spec):
    spec.setdefault("containers", [{"name": "main", "image": "x"}])
    return SchedulingPod.from_pod({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})


def verdict(p, n, usage=None, dra=frozenset()):
    """(failing plugin, its reasons) or None when every filter passes."""
    failed = rejected(run_filters(p, n, usage, dra))
    return None if failed is None else (failed.plugin, list(failed.reasons))


def taint(key, value=None, effect="NoSchedule"):
    t = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


# --- TaintToleration: TestTaintTolerationFilter / TestTolerationToleratesTaint -------------------

TAINT_CASES = [
    ("no tolerations, NoSchedule taint", [], [taint("dedicated", "user1")], False),
    (
        "dedicated to user2 cannot use user1's node",
        [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
        [taint("dedicated", "user1")],
        False,
    ),
    (
        "toleration for the same key and value",
        [{"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"}],
        [taint("dedicated", "user1")],
        True,
    ),
    (
        "non-empty effect that differs",
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
        [taint("foo", "bar")],
        False,
    ),
    (
        "empty toleration effect matches every effect",
        [{"key": "foo", "operator": "Equal", "value": "bar"}],
        [taint("foo", "bar")],
        True,
    ),
    ("PreferNoSchedule taints only score", [], [taint("dedicated", "user1", "PreferNoSchedule")], True),
    (
        "Exists ignores the taint's value",
        [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
        [taint("foo", "bar")],
        True,
    ),
    (
        "empty key with Exists matches every taint",
        [{"operator": "Exists"}],
        [taint("foo", "bar"), taint("node.kubernetes.io/unreachable", effect="NoExecute")],
        True,
    ),
    (
        "empty key with Exists, effect NoSchedule, leaves NoExecute",
        [{"operator": "Exists", "effect": "NoSchedule"}],
        [taint("foo", "bar"), taint("gpu", "x", "NoExecute")],
        False,
    ),
    (
        "Equal with different values",
        [{"key": "foo", "operator": "Equal", "value": "value1", "effect": "NoSchedule"}],
        [taint("foo", "value2")],
        False,
    ),
    (
        "same key and value, other effect",
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"}],
        [taint("foo", "bar", "NoExecute")],
        False,
    ),
    (
        "NoExecute tolerated for a while still passes the filter",
        [
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 60,
            }
        ],
        [taint("node.kubernetes.io/unreachable", effect="NoExecute")],
        True,
    ),
    ("every taint must be tolerated", [{"key": "a", "operator": "Exists"}], [taint("a"), taint("b")], False),
    (
        "operator defaults to Equal; missing value equals an empty one",
        [{"key": "nvidia.com/gpu"}],
        [taint("nvidia.com/gpu")],
        True,
    ),
]


@pytest.mark.parametrize("case,tolerations,taints,fits", TAINT_CASES, ids=[c[0] for c in TAINT_CASES])
def test_taint_toleration(case, tolerations, taints, fits):
    got = verdict(pod(tolerations=tolerations), node(taints=taints))
    assert got == (None if fits else ("TaintToleration", [REASON_TAINT]))


def test_default_tolerations_cover_only_the_noexecute_taints_of_a_notready_node():
    """DefaultTolerationSeconds adds 300 s for not-ready/unreachable NoExecute; the NoSchedule twin
    that the node lifecycle controller sets next to it still filters a default pod."""
    p = pod()
    added = [t.to_dict() for t in p.tolerations]
    assert {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "value": "",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    } in added
    assert verdict(p, node(taints=[taint("node.kubernetes.io/unreachable", effect="NoExecute")])) is None
    both = [taint("node.kubernetes.io/unreachable"), taint("node.kubernetes.io/unreachable", effect="NoExecute")]
    assert verdict(p, node(taints=both)) == ("TaintToleration", [REASON_TAINT])
    assert (
        verdict(pod(tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]), node(taints=both))
        is None
    )


def test_default_tolerations_are_not_added_over_the_pods_own():
    own = [Toleration("", "Exists", "", "", None)]
    assert with_default_tolerations(own) == own  # an empty key with no effect already covers both
    mine = Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute", 10)
    out = with_default_tolerations([mine])
    assert [t.key for t in out] == ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] and out[
        0
    ].seconds == 10


@pytest.mark.parametrize(
    "tolerations,message",
    [
        ([{"key": "a", "operator": "Gt", "value": "5"}], "spec.tolerations[0].operator: must be Exists or Equal"),
        (
            [{"key": "a"}, {"key": "b"}, {"key": "c", "operator": "In"}],
            "spec.tolerations[2].operator: must be Exists or Equal",
        ),
        ([{"operator": "Equal", "value": "x"}], "spec.tolerations[0].operator: must be Exists when `key` is empty"),
        ([{"key": "a", "operator": "Exists", "value": "x"}], "spec.tolerations[0].value: must be empty"),
        (
            [{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}],
            "spec.tolerations[0].tolerationSeconds: only allowed with effect NoExecute",
        ),
        ([{"key": "a", "effect": "Sometimes"}], "spec.tolerations[0].effect: must be one of"),
        ([{"key": "bad key!"}], "spec.tolerations[0].key:"),
        ({"key": "a"}, "spec.tolerations: must be a list"),
        (["a"], "spec.tolerations[0]: must be an object"),
        ([{"key": "a", "tolerationSeconds": "5", "effect": "NoExecute"}], "tolerationSeconds: must be an integer"),
        ([{"key": "a", "operater": "Exists"}], "spec.tolerations[0]: unknown field(s) operater"),
    ],
)
def test_malformed_tolerations_say_where(tolerations, message):
    with pytest.raises(InputError) as err:
        pod(tolerations=tolerations)
    assert message in str(err.value)


def test_toleration_flag_syntax():
    assert parse_toleration_flag("nvidia.com/gpu=present:NoSchedule") == {
        "key": "nvidia.com/gpu",
        "operator": "Equal",
        "value": "present",
        "effect": "NoSchedule",
    }
    assert parse_toleration_flag("dedicated:NoExecute") == {
        "key": "dedicated",
        "operator": "Exists",
        "effect": "NoExecute",
    }
    assert parse_toleration_flag("*") == {"operator": "Exists"}
    assert len(parse_tolerations([parse_toleration_flag("a=b")])) == 1


# --- NodeUnschedulable: TestNodeUnschedulable ------------------------------------------------------


@pytest.mark.parametrize(
    "tolerations,fits",
    [
        ([], False),
        ([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}], True),  # Equal with an empty value
        ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], True),
        ([{"operator": "Exists"}], True),
        ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}], False),
    ],
)
def test_node_unschedulable(tolerations, fits):
    got = verdict(pod(tolerations=tolerations), node(unschedulable=True))
    assert got == (None if fits else ("NodeUnschedulable", [REASON_UNSCHEDULABLE]))


def test_cordoned_node_reports_unschedulable_before_its_taints():
    n = node(unschedulable=True, taints=[taint("node.kubernetes.io/unschedulable"), taint("dedicated", "x")])
    assert verdict(pod(), n) == ("NodeUnschedulable", [REASON_UNSCHEDULABLE])
    results = run_filters(pod(), n)
    assert [r.plugin for r in results] == ["NodeUnschedulable"]  # the first rejection stops the run


# --- NodeName ----------------------------------------------------------------------------------------


def test_node_name():
    assert verdict(pod(nodeName="node-1"), node("node-1")) is None
    assert verdict(pod(nodeName="node-2"), node("node-1")) == ("NodeName", [REASON_NODE_NAME])


# --- NodeAffinity: TestNodeAffinity, TestMatchNodeSelectorTerms --------------------------------------


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key, op, *values):
    out = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


AFFINITY_CASES = [
    ("missing labels", {"nodeSelector": {"foo": "bar"}}, "node-1", {}, False),
    ("node labels are superset", {"nodeSelector": {"foo": "bar"}}, "node-1", {"foo": "bar", "baz": "blah"}, True),
    ("node labels are subset", {"nodeSelector": {"foo": "bar", "baz": "blah"}}, "node-1", {"foo": "bar"}, False),
    (
        "affinity matches but the nodeSelector does not",
        {"nodeSelector": {"foo": "bar"}, "affinity": required({"matchExpressions": [expr("foo", "Exists")]})},
        "node-1",
        {"foo": "barrrrrr"},
        False,
    ),
    (
        "Gt matches",
        {"affinity": required({"matchExpressions": [expr("kernel-version", "Gt", "0204")]})},
        "node-1",
        {"kernel-version": "0206"},
        True,
    ),
    (
        "Lt on a non-integer label fails",
        {"affinity": required({"matchExpressions": [expr("kernel-version", "Lt", "5")]})},
        "node-1",
        {"kernel-version": "4.1"},
        False,
    ),
    # Gt/Lt read both sides as labels.Requirement does (strconv.ParseInt, base 10, int64); the API server
    # accepts any single value, and a term whose value does not parse never matches (checked against v1.36).
    (
        "Gt with a non-integer value never matches",
        {"affinity": required({"matchExpressions": [expr("a", "Gt", "x")]})},
        "node-1",
        {"a": "5"},
        False,
    ),
    (
        "Gt on a label with '_' separators fails",
        {"affinity": required({"matchExpressions": [expr("a", "Gt", "5")]})},
        "node-1",
        {"a": "1_000"},
        False,
    ),
    (
        "Gt on a label beyond int64 fails",
        {"affinity": required({"matchExpressions": [expr("a", "Gt", "1")]})},
        "node-1",
        {"a": "9223372036854775808"},
        False,
    ),
    (
        "Lt with leading zeros is decimal",
        {"affinity": required({"matchExpressions": [expr("a", "Lt", "010")]})},
        "node-1",
        {"a": "9"},
        True,
    ),
    (
        "NotIn matches",
        {"affinity": required({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]})},
        "node-1",
        {"mem-type": "DDR3"},
        True,
    ),
    (
        "NotIn matches an absent label",
        {"affinity": required({"matchExpressions": [expr("mem-type", "NotIn", "DDR")]})},
        "node-1",
        {},
        True,
    ),
    (
        "DoesNotExist",
        {"affinity": required({"matchExpressions": [expr("gpu", "DoesNotExist")]})},
        "node-1",
        {"gpu": "x"},
        False,
    ),
    (
        "matchExpressions are ANDed",
        {"affinity": required({"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]})},
        "node-1",
        {"GPU": "NVIDIA-GRID-K1"},
        False,
    ),
    (
        "empty matchExpressions match nothing",
        {"affinity": required({"matchExpressions": []})},
        "node-1",
        {"foo": "bar"},
        False,
    ),
    (
        "an invalid label value fails its term",
        {"affinity": required({"matchExpressions": [expr("foo", "NotIn", "invalid value: ___@#$%^")]})},
        "node-1",
        {"foo": "bar"},
        False,
    ),
    (
        "terms are ORed",
        {
            "affinity": required(
                {"matchExpressions": [expr("zone", "In", "a")]}, {"matchExpressions": [expr("zone", "In", "b")]}
            )
        },
        "node-1",
        {"zone": "b"},
        True,
    ),
    (
        "matchFields In on metadata.name, other node",
        {"affinity": required({"matchFields": [expr("metadata.name", "In", "node1")]})},
        "node2",
        {},
        False,
    ),
    (
        "two terms of metadata.name",
        {
            "affinity": required(
                {"matchFields": [expr("metadata.name", "In", "node1")]},
                {"matchFields": [expr("metadata.name", "In", "node2")]},
            )
        },
        "node2",
        {},
        True,
    ),
    (
        "conflicting matchFields in one term",
        {
            "affinity": required(
                {"matchFields": [expr("metadata.name", "In", "node1"), expr("metadata.name", "In", "node2")]}
            )
        },
        "node2",
        {},
        False,
    ),
    (
        "matchFields fail, matchExpressions of another term match",
        {
            "affinity": required(
                {"matchFields": [expr("metadata.name", "In", "node1"), expr("metadata.name", "In", "node2")]},
                {"matchExpressions": [expr("foo", "In", "bar")]},
            )
        },
        "node2",
        {"foo": "bar"},
        True,
    ),
    (
        "a label named metadata.name is not the node's name",
        {"affinity": required({"matchFields": [expr("metadata.name", "In", "host_1")]})},
        "not_host_1",
        {"metadata.name": "host_1"},
        False,
    ),
    (
        "matchFields NotIn",
        {"affinity": required({"matchFields": [expr("metadata.name", "NotIn", "node1")]})},
        "node2",
        {},
        True,
    ),
]


# Cases whose terms name nodes through matchFields: NodeAffinity's PreFilter cuts the other nodes first.
PREFILTER_REASONS = {
    "matchFields In on metadata.name, other node": "node(s) didn't satisfy plugin(s) [NodeAffinity]",
    "a label named metadata.name is not the node's name": "node(s) didn't satisfy plugin(s) [NodeAffinity]",
    "conflicting matchFields in one term": "pod affinity terms conflict",
}


@pytest.mark.parametrize("case,spec,name,labels,fits", AFFINITY_CASES, ids=[c[0] for c in AFFINITY_CASES])
def test_node_affinity(case, spec, name, labels, fits):
    got = verdict(pod(**spec), node(name, labels))
    assert got == (None if fits else ("NodeAffinity", [PREFILTER_REASONS.get(case, REASON_AFFINITY)]))


def test_matchfields_filter_still_checks_nodes_inside_the_prefilter_cut():
    spec = {
        "affinity": required(
            {"matchFields": [expr("metadata.name", "In", "node1")], "matchExpressions": [expr("pool", "In", "a")]}
        )
    }
    assert verdict(pod(**spec), node("node1", {"pool": "b"})) == ("NodeAffinity", [REASON_AFFINITY])
    assert verdict(pod(**spec), node("node1", {"pool": "a"})) is None


@pytest.mark.parametrize(
    "spec,message",
    [
        (
            {"affinity": required({"matchExpressions": [expr("a", "Near", "b")]})},
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: must be one of",
        ),
        (
            {"affinity": required({"matchExpressions": [expr("a", "In")]})},
            "matchExpressions[0].values: must be non-empty for In",
        ),
        (
            {"affinity": required({}, {"matchExpressions": [expr("a", "Gt", "1", "2")]})},
            "nodeSelectorTerms[1].matchExpressions[0].values: Gt needs exactly one value, got 2",
        ),
        (
            {"affinity": required({"matchFields": [expr("metadata.labels", "In", "x")]})},
            "matchFields[0].key: matchFields supports only metadata.name",
        ),
        (
            {"affinity": required({"matchFields": [expr("metadata.name", "In", "a", "b")]})},
            "matchFields needs exactly one value, got 2",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
                }
            },
            "nodeSelectorTerms: must have at least one term",
        ),
        ({"nodeSelector": {"zone": ["a"]}}, "spec.nodeSelector"),
        ({"nodeSelector": "zone=a"}, "spec.nodeSelector: must be a map"),
    ],
)
def test_malformed_affinity_says_where(spec, message):
    if isinstance(spec.get("nodeSelector"), str):
        spec["nodeSelector"] = 5  # a string is only accepted from the page and command forms
        message = "spec.nodeSelector: must be a map"
    with pytest.raises(InputError) as err:
        pod(**spec)
    assert message in str(err.value)


# --- NodePorts: TestNodePorts ------------------------------------------------------------------------


def with_ports(*ports):
    return {"containers": [{"name": "c", "ports": [dict(containerPort=80, **p) for p in ports]}]}


PORT_CASES = [
    ("no host ports: skipped", [], [], True),
    ("other port", [{"hostPort": 8080}], [("TCP", "0.0.0.0", 8081)], True),
    ("same port, different protocol", [{"hostPort": 8080, "protocol": "UDP"}], [("TCP", "0.0.0.0", 8080)], True),
    ("different host ip", [{"hostPort": 8080, "hostIP": "127.0.0.1"}], [("TCP", "127.0.0.2", 8080)], True),
    ("same ip and port", [{"hostPort": 8080, "hostIP": "127.0.0.1"}], [("TCP", "127.0.0.1", 8080)], False),
    ("first tcp port conflict due to 0.0.0.0 hostIP", [{"hostPort": 8001}], [("TCP", "127.0.0.1", 8001)], False),
    (
        "used on 0.0.0.0 blocks a specific ip",
        [{"hostPort": 8001, "hostIP": "10.0.0.1"}],
        [("TCP", "0.0.0.0", 8001)],
        False,
    ),
]


@pytest.mark.parametrize("case,ports,used,fits", PORT_CASES, ids=[c[0] for c in PORT_CASES])
def test_node_ports(case, ports, used, fits):
    usage = NodeUsage(1, {}, used)
    got = verdict(pod(**with_ports(*ports)), node(), usage)
    assert got == (None if fits else ("NodePorts", [REASON_PORTS]))


def test_sidecar_host_ports_count_and_plain_init_containers_do_not():
    spec = {
        "containers": [{"name": "c"}],
        "initContainers": [
            {"name": "init", "ports": [{"containerPort": 1, "hostPort": 9000}]},
            {"name": "proxy", "restartPolicy": "Always", "ports": [{"containerPort": 1, "hostPort": 9001}]},
        ],
    }
    p = pod(**spec)
    assert p.host_ports == [("TCP", "0.0.0.0", 9001)]


def test_host_network_container_ports_are_host_ports():
    # Pod defaulting (SetDefaults_Pod): with hostNetwork, a port without hostPort gets hostPort = containerPort.
    spec = {
        "hostNetwork": True,
        "containers": [{"name": "c", "ports": [{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}]}],
    }
    p = pod(**spec)
    assert p.host_ports == [("TCP", "0.0.0.0", 8080), ("UDP", "0.0.0.0", 53)]
    assert verdict(p, node(), NodeUsage(1, {}, [("TCP", "0.0.0.0", 8080)])) == ("NodePorts", [REASON_PORTS])
    assert (
        pod(containers=[{"name": "c", "ports": [{"containerPort": 8080}]}]).host_ports == []
    )  # no hostNetwork: no host port


# --- NodeResourcesFit: TestEnoughRequests / TestNotEnoughRequests / TestRestartableInitContainers -----


def c(cpu=None, mem=None, extra=None):
    req = dict(extra or {})
    if cpu is not None:
        req["cpu"] = cpu
    if mem is not None:
        req["memory"] = mem
    return {"name": "c", "resources": {"requests": req}}


FIT_NODE = {
    "cpu": "10m",
    "memory": "20",
    "pods": "32",
    "example.com/aaa": "5",
    "ephemeral-storage": "20",
    "hugepages-2Mi": "5",
}

FIT_CASES = [
    ("no resources requested always fits", {"containers": [c()]}, (0, {"cpu": 10, "memory": 20}), None),
    (
        "too many resources fails",
        {"containers": [c("1m", "1")]},
        (0, {"cpu": 10, "memory": 20}),
        ["Insufficient cpu", "Insufficient memory"],
    ),
    (
        "too many resources fails due to init container cpu",
        {"containers": [c("1m", "1")], "initContainers": [c("3m", "1")]},
        (0, {"cpu": 8, "memory": 19}),
        ["Insufficient cpu"],
    ),
    (
        "too many resources fails due to highest init container cpu",
        {"containers": [c("1m", "1")], "initContainers": [c("3m", "1"), c("2m", "1")]},
        (0, {"cpu": 8, "memory": 19}),
        ["Insufficient cpu"],
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        {"containers": [c("1m", "1")], "initContainers": [c("1m", "1")]},
        (0, {"cpu": 9, "memory": 19}),
        None,
    ),
    (
        "multiple init containers fit because it's the max, not sum",
        {"containers": [c("1m", "1")], "initContainers": [c("1m", "1"), c("1m", "1")]},
        (0, {"cpu": 9, "memory": 19}),
        None,
    ),
    ("both resources fit", {"containers": [c("1m", "1")]}, (0, {"cpu": 5, "memory": 5}), None),
    ("one resource memory fits", {"containers": [c("2m", "1")]}, (0, {"cpu": 9, "memory": 5}), ["Insufficient cpu"]),
    ("one resource cpu fits", {"containers": [c("1m", "2")]}, (0, {"cpu": 5, "memory": 19}), ["Insufficient memory"]),
    ("equal edge case", {"containers": [c("5m", "1")]}, (0, {"cpu": 5, "memory": 19}), None),
    (
        "equal edge case for init container",
        {"containers": [c("4m", "1")], "initContainers": [c("5m", "1")]},
        (0, {"cpu": 5, "memory": 19}),
        None,
    ),
    ("extended resource fits", {"containers": [c(extra={"example.com/aaa": "1"})]}, (0, {}), None),
    (
        "extended resource allocatable enforced",
        {"containers": [c(extra={"example.com/aaa": "1"})]},
        (0, {"example.com/aaa": 5}),
        ["Insufficient example.com/aaa"],
    ),
    (
        "extended resource capacity enforced",
        {"containers": [c(extra={"example.com/aaa": "10"})]},
        (0, {}),
        ["Insufficient example.com/aaa"],
    ),
    (
        "extended resource missing on the node",
        {"containers": [c(extra={"example.com/bbb": "1"})]},
        (0, {}),
        ["Insufficient example.com/bbb"],
    ),
    (
        "hugepages resource capacity enforced",
        {"containers": [c(extra={"hugepages-2Mi": "10"})]},
        (0, {}),
        ["Insufficient hugepages-2Mi"],
    ),
    (
        "kubernetes.io/ prefixed native resource is checked",
        {"containers": [c(extra={"kubernetes.io/something": "1"})]},
        (0, {}),
        ["Insufficient kubernetes.io/something"],
    ),
    ("unknown unprefixed names are dropped", {"containers": [c(extra={"gizmos": "3"})]}, (0, {}), None),
    (
        "ephemeral storage",
        {"containers": [c(extra={"ephemeral-storage": "25"})]},
        (0, {}),
        ["Insufficient ephemeral-storage"],
    ),
    (
        "requests + overhead fits",
        {"containers": [c("1m", "1")], "overhead": {"cpu": "3m", "memory": "13"}},
        (0, {"cpu": 5, "memory": 5}),
        None,
    ),
    (
        "requests + overhead does not fit for memory",
        {"containers": [c("1m", "1")], "overhead": {"cpu": "1m", "memory": "15"}},
        (0, {"cpu": 5, "memory": 5}),
        ["Insufficient memory"],
    ),
    ("even without requests, no room for one more pod", {"containers": [c()]}, (32, {}), [REASON_TOO_MANY_PODS]),
    (
        "too many pods and insufficient cpu are reported together",
        {"containers": [c("20m")]},
        (32, {}),
        [REASON_TOO_MANY_PODS, "Insufficient cpu"],
    ),
    (
        "sidecar adds to the app containers: 1m + 2m > 2m free",
        {"containers": [c("1m")], "initContainers": [dict(c("2m"), restartPolicy="Always")]},
        (0, {"cpu": 8}),
        ["Insufficient cpu"],
    ),
    (
        "a plain init container after a sidecar runs next to it",
        {"containers": [c("1m")], "initContainers": [dict(c("2m"), restartPolicy="Always"), c("7m")]},
        (0, {"cpu": 2}),
        ["Insufficient cpu"],
    ),
    (
        "a plain init container before the sidecar does not",
        {"containers": [c("1m")], "initContainers": [c("7m"), dict(c("2m"), restartPolicy="Always")]},
        (0, {"cpu": 3}),
        None,
    ),
    (
        "requests default from limits",
        {"containers": [{"name": "c", "resources": {"limits": {"cpu": "11m"}}}]},
        (0, {}),
        ["Insufficient cpu"],
    ),
    (
        "pod-level requests replace the containers' cpu",
        {"containers": [c("9m")], "resources": {"requests": {"cpu": "2m"}}},
        (0, {"cpu": 8}),
        None,
    ),
    # SetDefaults_Pod (defaultPodRequests): a pod-level limit without a pod-level request defaults the request
    # to the containers' aggregate request where they have one, else to the limit.
    (
        "pod-level limit: the request is the containers' request, not the limit",
        {"containers": [c("1m")], "resources": {"limits": {"cpu": "8m"}}},
        (0, {"cpu": 5}),
        None,
    ),
    (
        "pod-level limit: without container requests the request is the limit",
        {"containers": [c(mem="1")], "resources": {"limits": {"cpu": "8m"}}},
        (0, {"cpu": 5}),
        ["Insufficient cpu"],
    ),
]


@pytest.mark.parametrize("case,spec,used,reasons", FIT_CASES, ids=[c[0] for c in FIT_CASES])
def test_node_resources_fit(case, spec, used, reasons):
    pods, requested = used
    got = verdict(pod(**spec), node(allocatable=FIT_NODE), NodeUsage(pods, requested))
    assert got == (None if reasons is None else ("NodeResourcesFit", reasons))


def test_dra_backed_extended_resource_is_left_to_dra_where_the_node_lacks_it():
    spec = {"containers": [c(extra={"example.com/gpu": "1"})]}
    n = node(allocatable=FIT_NODE)
    assert verdict(pod(**spec), n, dra=frozenset({"example.com/gpu"})) is None  # delegated (DRAExtendedResource on)
    assert verdict(pod(**spec), n) == ("NodeResourcesFit", ["Insufficient example.com/gpu"])
    plugin_node = node(
        allocatable={**FIT_NODE, "example.com/gpu": "1"}
    )  # a device plugin serves it here: counted normally
    assert verdict(
        pod(**spec), plugin_node, NodeUsage(1, {"example.com/gpu": 1}), dra=frozenset({"example.com/gpu"})
    ) == ("NodeResourcesFit", ["Insufficient example.com/gpu"])


def test_effective_request_formula():
    spec = {
        "containers": [c("100m", "1Gi"), c("200m", "1Gi")],
        "initContainers": [c("1500m", "512Mi"), dict(c("50m", "64Mi"), restartPolicy="Always"), c("400m", "3Gi")],
        "overhead": {"cpu": "250m", "memory": "100Mi"},
    }
    got = pod_requests(spec)
    # app = 300m + sidecar 50m = 350m; init peaks: 1500m, then 50m + 400m; max = 1500m; + overhead 250m
    assert got["cpu"] == 1750
    # memory: app 2Gi + 64Mi; init peaks 512Mi, 64Mi + 3Gi = 3Gi + 64Mi (largest); + 100Mi
    assert got["memory"] == 3 * 2**30 + 64 * 2**20 + 100 * 2**20


def test_pod_level_requests_are_defaulted_like_the_api_server():
    assert pod_requests({"containers": [c("100m", "1Gi")], "resources": {"limits": {"cpu": "4", "memory": "8Gi"}}}) == {
        "cpu": 100,
        "memory": 2**30,
    }
    assert pod_requests({"containers": [c(mem="1Gi")], "resources": {"limits": {"cpu": "4"}}}) == {
        "cpu": 4000,
        "memory": 2**30,
    }
    assert pod_requests(
        {"containers": [c("100m")], "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}}}
    ) == {"cpu": 2000}
    hp = {"name": "h", "resources": {"limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}}}
    assert pod_requests({"containers": [hp], "resources": {"limits": {"memory": "2Gi"}}})["hugepages-2Mi"] == 4 * 2**20


def test_quantities_round_up():
    assert pod_requests({"containers": [c("0.0001")]}) == {"cpu": 1}  # 0.1m -> 1m (MilliValue rounds up)
    assert pod_requests({"containers": [c(mem="1.5")]}) == {"memory": 2}


def test_requests_are_summed_exactly_and_rounded_once_per_pod():
    # PodRequests adds Quantities (exact); the scheduler's Resource takes MilliValue/Value of the sums.
    assert pod_requests({"containers": [c("0.0001"), c("0.0001")]}) == {"cpu": 1}  # 0.2m -> 1m, not 1m + 1m
    assert pod_requests({"containers": [c(mem="0.5"), c(mem="0.5")]}) == {"memory": 1}
    assert pod_requests({"containers": [c("0.0004")], "overhead": {"cpu": "0.0004"}}) == {"cpu": 1}


@pytest.mark.parametrize(
    "spec,message",
    [
        ({"containers": [c("lots")]}, "spec.containers[0].resources.requests.cpu: 'lots' is not a quantity"),
        (
            {
                "containers": [c()],
                "initContainers": [c("1m"), {"name": "x", "resources": {"limits": {"memory": "-1Gi"}}}],
            },
            "spec.initContainers[1].resources.limits.memory: must not be negative",
        ),
        (
            {"containers": [{"name": "c", "resources": {"requests": ["cpu"]}}]},
            "spec.containers[0].resources.requests: must be a map",
        ),
        ({"containers": [c()], "overhead": {"cpu": True}}, "spec.overhead.cpu: must be a quantity"),
        ({"containers": {"name": "c"}}, "spec.containers: must be a list"),
    ],
)
def test_malformed_resources_say_where(spec, message):
    with pytest.raises(InputError) as err:
        pod(**spec)
    assert message in str(err.value)


def test_node_without_allocatable_has_room_for_no_pod():
    # NodeInfo.Allocatable of such a node is all zero, pods too: "Too many pods" even for a pod without
    # requests, and "Insufficient <r>" for each requested resource.
    for status in ({}, {"allocatable": {}}):
        n = NodeFacts({"metadata": {"name": "n"}, "spec": {}, "status": status})
        assert verdict(pod(containers=[c("1")]), n) == ("NodeResourcesFit", [REASON_TOO_MANY_PODS, "Insufficient cpu"])
        assert verdict(pod(), n) == ("NodeResourcesFit", [REASON_TOO_MANY_PODS])


def test_node_without_allocatable_is_not_simulated_for_the_would_be_pod_of_bare_claims():
    raw = {"metadata": {"name": "n"}, "spec": {}, "status": {}}
    results = run_filters(SchedulingPod.would_be(), NodeFacts(raw))
    assert (
        results[-1].plugin == "NodeResourcesFit"
        and results[-1].passed is None
        and "not simulated" in results[-1].reason
    )
    assert rejected(results) is None


def test_filters_run_in_the_scheduler_order_and_stop_at_the_first_rejection():
    p = pod(nodeSelector={"pool": "a"}, containers=[c("1")], tolerations=[{"key": "t", "operator": "Exists"}])
    n = node(labels={"pool": "b"}, taints=[taint("t")], allocatable={"cpu": "0", "memory": "0", "pods": "0"})
    results = run_filters(p, n)
    assert [(r.plugin, r.passed) for r in results] == [
        ("NodeUnschedulable", True),
        ("TaintToleration", True),
        ("NodeAffinity", False),
    ]


def test_unsimulated_plugins_are_named():
    p = pod(
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]
            }
        },
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
    )
    assert [name for name, _ in p.not_simulated] == [
        "InterPodAffinity",
        "PodTopologySpread",
        "VolumeBinding/VolumeRestrictions/NodeVolumeLimits/VolumeZone",
    ]
    soft = pod(
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
        volumes=[{"name": "t", "emptyDir": {}}],
    )
    assert soft.not_simulated == []


def test_footprint_of_a_resized_pod_counts_what_the_scheduler_counts():
    spec = {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}

    def requests(**status):
        return pod_footprint(
            {"metadata": {"name": "w", "namespace": "ns"}, "spec": spec, "status": {"phase": "Running", **status}}
        )["requests"]

    assert requests() == {"cpu": 1000}
    # resized down to 1 CPU while 3 are still allocated and actuated: the largest counts
    assert requests(
        containerStatuses=[{"name": "c", "resources": {"requests": {"cpu": "3"}}, "allocatedResources": {"cpu": "3"}}]
    ) == {"cpu": 3000}
    # allocatedResources alone is read only next to a reported `resources`
    assert requests(containerStatuses=[{"name": "c", "allocatedResources": {"cpu": "3"}}]) == {"cpu": 1000}
    # an Infeasible resize: the spec no longer counts, the actuated request does
    assert requests(
        containerStatuses=[{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
        conditions=[{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
    ) == {"cpu": 500}


def test_footprint_of_a_bound_pod():
    raw = {
        "metadata": {"name": "w", "namespace": "ns", "uid": "u1"},
        "spec": {
            "nodeName": "n1",
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "1"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                }
            ],
        },
        "status": {"phase": "Running"},
    }
    assert pod_footprint(raw) == {
        "kind": "PodFootprint",
        "metadata": {"namespace": "ns", "name": "w", "uid": "u1"},
        "node": "n1",
        "phase": "Running",
        "requests": {"cpu": 500, "nvidia.com/gpu": 1},
        "hostPorts": [["TCP", "0.0.0.0", 8080]],
        "priority": 0,
    }
    # The priority admission fills in is what preemption compares; a system class without it is known too.
    assert pod_footprint({**raw, "spec": {**raw["spec"], "priority": 1000}})["priority"] == 1000
    assert (
        pod_footprint({**raw, "spec": {**raw["spec"], "priorityClassName": "system-node-critical"}})["priority"]
        == 2000001000
    )
    assert pod_footprint({**raw, "spec": {**raw["spec"], "priorityClassName": "batch-low"}})["priority"] is None
