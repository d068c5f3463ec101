"""The what-if shares engine work between pending pods (fleet.SharedFits: node filter verdicts per set
of pod filter inputs, DynamicResources verdicts per set of claims). Checked here against the plain
engine: each workload resolved and previewed on its own, before and after the changes, on random
fleets, random pending pods and claims, and random scenarios."""

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devcluster import builders as b
from dra import Features, Inventory, preview, resolve_claims
from dra.errors import InputError
from dra.fleet import SharedFits
from dra.nodefilters import SchedulingPod
from dra.whatif import (
    ERROR,
    LOSES_PLACE,
    NOW_SCHEDULABLE,
    STILL_BLOCKED,
    STILL_SCHEDULABLE,
    ScenarioError,
    Workload,
    apply,
    evaluate,
    parse_changes,
)

GPU, MIG, EXT = "gpu.nvidia.com", "mig.nvidia.com", "gpu-ext.example.com"
MODELS = {"h100": b.DEFAULT_GPU_MODELS["h100"], "a100": b.DEFAULT_GPU_MODELS["a100"]}
TYPE = "device.attributes['gpu.nvidia.com'].type"
CLASSES = [
    (GPU, f"device.driver == '{GPU}' && {TYPE} == 'gpu'", None),
    (MIG, f"device.driver == '{GPU}' && {TYPE} == 'mig'", None),
    (EXT, f"device.driver == '{GPU}' && {TYPE} == 'gpu'", "example.com/gpu"),  # DRA-backed extended resource
]
SELECTORS = [
    None,
    "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')",
    "device.attributes['gpu.nvidia.com'].nope == 1",  # an error on every device it meets
]
CONSTRAINTS = [None, [{"requests": [], "matchAttribute": "resource.kubernetes.io/numaNode"}]]
TAINT = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}

node_specs = st.fixed_dictionaries(
    {
        "model": st.sampled_from(sorted(MODELS)),
        "zone": st.sampled_from(["z0", "z1"]),
        "gpus": st.sampled_from([0, 2, 3, 4, 4]),
        "held": st.integers(0, 2),
        "mig": st.integers(0, 3).map(lambda i: i == 0),
        "tainted": st.integers(0, 3).map(lambda i: i == 0),
        "cordoned": st.integers(0, 4).map(lambda i: i == 0),
        "cpu": st.sampled_from(["4", "16"]),
    }
)
claim_sets = st.lists(  # the claims of a pod: (class, count, selector, constraint) per template
    st.tuples(
        st.sampled_from([GPU, GPU, GPU, MIG]),
        st.integers(1, 3),
        st.sampled_from([None, None, *SELECTORS]),
        st.sampled_from(CONSTRAINTS),
    ),
    min_size=1,
    max_size=2,
)
filter_sets = st.fixed_dictionaries(  # a pod's node filter inputs
    {
        "zone": st.sampled_from([None, "z0", "z1"]),
        "tolerates": st.booleans(),
        "cpu": st.sampled_from([None, "2", "12"]),
        "ext": st.sampled_from([0, 0, 1, 2]),  # example.com/gpu: count of DRA-backed extended resources
    }
)


@st.composite
def cases(draw):
    nodes = draw(st.lists(node_specs, min_size=1, max_size=5))
    claims = draw(st.lists(claim_sets, min_size=1, max_size=3))
    filters = draw(st.lists(filter_sets, min_size=1, max_size=3))
    # Pending pods pick from a few claim sets and filter sets, so that many share engine work.
    pods = draw(
        st.lists(
            st.tuples(st.integers(0, len(claims) - 1), st.integers(0, len(filters) - 1), st.integers(0, 3).map(bool)),
            min_size=1,
            max_size=8,
        )
    )
    bare = draw(st.lists(st.integers(0, len(claims) - 1), max_size=2))  # pending claims no pod uses
    return nodes, claims, filters, pods, bare


def build(case):
    """Objects of the case: nodes node-i, held claims ml/held-i-m (allocated, no pod), pending pods
    ml/p-j (templates t-j-k; a pod drawn `bound` also uses the first held claim), claims ml/c-j."""
    nodes, claims, filters, pods, bare = case
    rng = random.Random(1)
    objs = {
        "deviceclasses": [b.device_class(name, cel, ext, rng) for name, cel, ext in CLASSES],
        "nodes": [],
        "resourceslices": [],
        "resourceclaims": [],
        "resourceclaimtemplates": [],
        "pods": [],
        "namespaces": [b.namespace_obj("ml", rng)],
    }
    held = []
    for i, spec in enumerate(nodes):
        name = f"node-{i}"
        node = b.make_node(name, rng, MODELS[spec["model"]], zone=spec["zone"])
        node["status"]["allocatable"]["cpu"] = spec["cpu"]
        taints = [TAINT] if spec["tainted"] else []
        if spec["cordoned"]:
            node["spec"]["unschedulable"] = True
            taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        if taints:
            node["spec"]["taints"] = taints
        objs["nodes"].append(node)
        mig = "partitionable" if spec["mig"] else None
        objs["resourceslices"].extend(
            b.gpu_slices(name, node["metadata"]["uid"], MODELS[spec["model"]], spec["gpus"], rng, mig=mig)
        )
        for minor in range(min(spec["held"], spec["gpus"])):
            claim = b.make_claim(
                "ml", f"held-{i}-{minor}", b.claim_spec([{"name": "gpu", "deviceClassName": GPU}]), rng
            )
            b.allocate(claim, name, [{"request": "gpu", "driver": GPU, "pool": name, "device": f"gpu-{minor}"}])
            objs["resourceclaims"].append(claim)
            held.append(f"held-{i}-{minor}")

    def spec_of(claim_set):
        cls, count, selector, constraint = claim_set
        request = {"name": "r", "deviceClassName": cls, "count": count}
        if selector:
            request["selectors"] = [selector]
        return b.claim_spec([request], constraint)

    for j, (ci, fi, bound) in enumerate(pods):
        refs = []
        for k, claim_set in enumerate(claims[ci]):
            objs["resourceclaimtemplates"].append(b.make_template("ml", f"t-{j}-{k}", spec_of(claim_set), rng))
            refs.append({"name": f"c{k}", "resourceClaimTemplateName": f"t-{j}-{k}"})
        if bound and held:
            refs.append({"name": "held", "resourceClaimName": held[0]})
        f = filters[fi]
        requests = {}
        if f["cpu"]:
            requests["cpu"] = f["cpu"]
        if f["ext"]:
            requests["example.com/gpu"] = str(f["ext"])
        resources = {"claims": [{"name": r["name"]} for r in refs]}
        if requests:
            resources["requests"] = requests
            if f["ext"]:
                resources["limits"] = {"example.com/gpu": str(f["ext"])}
        spec = {"containers": [{"name": "c", "image": "x", "resources": resources}]}
        if refs:
            spec["resourceClaims"] = refs
        if f["zone"]:
            spec["nodeSelector"] = {"topology.kubernetes.io/zone": f["zone"]}
        if f["tolerates"]:
            spec["tolerations"] = [TOLERATION]
        objs["pods"].append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p-{j}", "namespace": "ml", "uid": f"uid-{j}"},
                "spec": spec,
                "status": {"phase": "Pending"},
            }
        )
    for j, ci in enumerate(bare):
        requests = [
            {"name": f"r{k}", "deviceClassName": cls, "count": count, **({"selectors": [sel]} if sel else {})}
            for k, (cls, count, sel, _) in enumerate(claims[ci])
        ] or [{"name": "r", "deviceClassName": GPU}]
        objs["resourceclaims"].append(b.make_claim("ml", f"c-{j}", b.claim_spec(requests), rng))
    return objs, held


def workloads_of(objs, bare):
    out = [Workload("pod", "ml", p["metadata"]["name"], p) for p in objs["pods"]]
    out += [
        Workload("claim", "ml", c["metadata"]["name"], c)
        for c in objs["resourceclaims"]
        if c["metadata"]["name"].startswith("c-")
    ]
    return out


def alone(inv, work):
    """(nodes where it fits, error text, resolve error) from the plain engine, this workload alone."""
    try:
        if work.kind == "pod":
            claims, bound = resolve_claims(inv, [work.raw])
            pod = SchedulingPod.from_pod(work.raw)
        else:
            claims, bound = resolve_claims(inv, [{k: v for k, v in work.raw.items() if k != "status"}])
            pod = SchedulingPod.would_be()
    except InputError as exc:
        return set(), str(exc), str(exc)
    result = preview(inv, claims, bound=bound, pod=pod)
    fits = {e["node"] for e in result["nodes"] if e["fits"]}
    errors = [e["error"] for e in result["nodes"] if e["error"]]
    error = errors[0] if errors and not fits and len(errors) == len(result["nodes"]) else None
    return fits, error, None


def expected_verdict(before, after):
    if after[2] and not after[0]:
        return ERROR
    if after[0]:
        return STILL_SCHEDULABLE if before[0] else NOW_SCHEDULABLE
    return LOSES_PLACE if before[0] else STILL_BLOCKED


def changes_of(data, nodes, held):
    choices = [f"{verb} node-{i}" for i in range(len(nodes)) for verb in ("remove", "drain", "cordon", "uncordon")]
    choices += [f"add node-{i} {n}" for i in range(len(nodes)) for n in (1, 2)]
    choices += [f"{verb} ml/{h}" for h in held for verb in ("release", "delete")]
    choices += [f"taint {GPU}/node-{i} maintenance=soon" for i in range(len(nodes))]
    choices += [f"class {GPU} {sel}" for sel in SELECTORS if sel]
    return data.draw(st.lists(st.sampled_from(choices), min_size=1, max_size=2))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases(), st.data())
def test_shared_verdicts_equal_each_workload_previewed_alone(case, data):
    objs, held = build(case)
    inv = Inventory.from_objects(objs, features=Features(device_taint_rules=True))
    nodes = {n["metadata"]["name"]: n for n in objs["nodes"]}
    work = workloads_of(objs, case[4])
    # Two scenarios one after the other on the same inventory: the second one reuses the first's
    # "before" verdicts, as an admin trying one change after another does.
    for _ in range(2):
        texts = changes_of(data, case[0], held)
        try:
            applied = apply(inv, parse_changes(texts), nodes)
        except ScenarioError:
            continue  # e.g. releasing a claim an earlier change already deleted
        entries = evaluate(inv, applied, work, examples=10**6)
        assert [(e["kind"], e["name"]) for e in entries] == [(w.kind, w.name) for w in work]
        added = set(applied.added)
        for w, entry in zip(work, entries, strict=True):
            before, after = alone(inv, w), alone(applied.inventory, w)
            where = (w.name, texts, entry, before, after, case)
            assert entry["verdict"] == expected_verdict(before, after), where
            assert set(entry["before"]["nodes"]) == before[0] and entry["before"]["fits"] == len(before[0]), where
            assert set(entry["after"]["nodes"]) == after[0] and entry["after"]["fits"] == len(after[0]), where
            assert entry["before"]["error"] == before[1], where
            assert entry["after"]["error"] == (after[1] or after[2]), where
            assert entry["onNewNodes"] == sorted(after[0] & added), where


def test_pods_that_share_claims_or_filters_get_their_own_answers():
    """Four pods: two claim sets x two zones. Each pod's nodes and each error's text (it names the
    pod's own claims) are its own, though the engine ran once per claim set and node."""
    case = (
        [
            {
                "model": "h100",
                "zone": z,
                "gpus": 2,
                "held": 0,
                "mig": False,
                "tainted": False,
                "cordoned": False,
                "cpu": "16",
            }
            for z in ("z0", "z1", "z1")
        ],
        [[(GPU, 2, None, None)], [(GPU, 1, SELECTORS[2], None)]],
        [{"zone": z, "tolerates": False, "cpu": None, "ext": 0} for z in ("z0", "z1")],
        [(0, 0, False), (0, 1, False), (1, 0, False), (1, 1, False)],
        [],
    )
    objs, _ = build(case)
    inv = Inventory.from_objects(objs)
    shared = SharedFits(inv)
    answers = []
    for w in workloads_of(objs, []):
        claims, bound = resolve_claims(inv, [w.raw])
        answers.append(shared.fits(claims, bound=bound, pod=SchedulingPod.from_pod(w.raw)))
    assert answers[0][:3] == ({"node-0"}, None, False)
    assert answers[1][:3] == ({"node-1", "node-2"}, None, False)
    # The erroring selector: no node fits, and not every node errs (the other zone's nodes are
    # filtered out), so there is no error answer; the nodes that erred are named.
    assert answers[2] == (set(), None, False, {"node-0"})
    assert answers[3] == (set(), None, False, {"node-1", "node-2"})
    # Two DRA claim sets, one set of verdicts each; nodes filtered out for both zones are never searched.
    assert len(shared._dra) == 2
    assert all(len(verdicts) == 3 for _, _, _, verdicts in shared._dra.values())
    # Without a node selector every node errs: the text names the pod's own claim.
    for j in (2, 3):
        raw = dict(objs["pods"][j], spec=dict(objs["pods"][j]["spec"]))
        raw["spec"].pop("nodeSelector")
        claims, bound = resolve_claims(inv, [raw])
        fits, error, undecided, erring = shared.fits(claims, bound=bound, pod=SchedulingPod.from_pod(raw))
        assert not fits and not undecided and erring == {"node-0", "node-1", "node-2"}
        assert f"claim ml/p-{j}-c0" in error, error
        assert error == alone(inv, Workload("pod", "ml", f"p-{j}", raw))[1]
