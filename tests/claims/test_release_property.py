"""Property: no sequence of release actions, interleaved with pods changing, ever removes the reservedFor
entry of a pod that exists and is not terminal, nor clears (or deletes) an allocation a live pod uses.

The requests the planners build are applied by the built-in API server's own store (real patch,
precondition and finalizer semantics), without HTTP so hypothesis can try many sequences.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claims.release.plans import PLANNERS, plan_action, pod_is_live, pod_references_claim
from devcluster.store import ApiError, NotFound, Store
from tests.ops_fixtures import FINALIZER, claim_raw, pod_raw

NS = "team-a"
POD_STATES = ("Running", "Pending", "Terminating", "Succeeded", "Failed", "missing", "replaced")
N_PODS = 4


def build(pod_states, extra_ref_state, deleting, generated):
    store = Store()
    uids = [f"pod-uid-{i}" for i in range(N_PODS)]
    reserved = [(f"p{i}", uids[i]) for i in range(N_PODS) if pod_states[i] is not None]
    claim = claim_raw(
        "c1",
        namespace=NS,
        uid="claim-uid",
        devices=["gpu-0"],
        reserved=reserved,
        owner=("p0", uids[0]) if generated else None,
    )
    store.create("resourceclaims", claim)
    if deleting:
        store.delete("resourceclaims", NS, "c1")
    for i, state in enumerate(pod_states):
        if state is not None:
            set_pod(store, i, state, uids[i])
    if extra_ref_state is not None:
        set_pod(store, "x", extra_ref_state, "pod-uid-x")
    return store


def set_pod(store, i, state, uid):
    name = f"p{i}"
    try:
        store.delete("pods", NS, name)
    except NotFound:
        pass
    if state == "missing":
        return
    phase = {"Terminating": "Running", "replaced": "Pending"}.get(state, state)
    pod = pod_raw(name, namespace=NS, uid=uid if state != "replaced" else uid + "-new", claim="c1", phase=phase)
    if state == "Terminating":
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    store.create("pods", pod)


def snapshot(store):
    try:
        claim = store.get("resourceclaims", NS, "c1")
    except NotFound:
        claim = None
    pods = {p["metadata"]["name"]: p for p in store.list("pods", namespace=NS)}
    return claim, pods


def send(store, request):
    """Apply one planned request through the store, as the HTTP layer of the built-in server would."""
    name = request.path.rstrip("/").split("/")
    sub = "status" if name[-1] == "status" else None
    claim_name = name[-2] if sub else name[-1]
    if request.method == "DELETE":
        store.delete("resourceclaims", NS, claim_name, preconditions=request.body["preconditions"])
    else:
        store.patch("resourceclaims", NS, claim_name, request.body, request.content_type, subresource=sub)


actions = st.tuples(
    st.sampled_from(sorted(PLANNERS)),
    st.one_of(
        st.none(),
        st.lists(st.sampled_from([f"pod-uid-{i}" for i in range(N_PODS)]), min_size=1, max_size=2, unique=True),
    ),
)
world_changes = st.tuples(st.integers(0, N_PODS - 1), st.sampled_from(POD_STATES))
steps = st.lists(
    st.one_of(st.tuples(st.just("act"), actions), st.tuples(st.just("world"), world_changes)), min_size=1, max_size=8
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pod_states=st.lists(st.one_of(st.none(), st.sampled_from(POD_STATES)), min_size=N_PODS, max_size=N_PODS),
    extra_ref_state=st.one_of(st.none(), st.sampled_from(POD_STATES)),
    deleting=st.booleans(),
    generated=st.booleans(),
    sequence=steps,
)
def test_actions_never_release_what_a_live_pod_uses(pod_states, extra_ref_state, deleting, generated, sequence):
    store = build(pod_states, extra_ref_state, deleting, generated)
    for kind, step in sequence:
        if kind == "world":
            i, state = step
            set_pod(store, i, state, f"pod-uid-{i}")
            continue
        action, uids = step
        before, pods = snapshot(store)
        if before is None:
            return
        plan = plan_action(action, before, pods)
        if uids and action == "remove_reservations":
            plan = plan_action(action, before, pods, uids=uids)
        if plan.request is None:
            assert plan.refused
            continue
        try:
            send(store, plan.request)
        except ApiError as exc:
            assert exc.code in (409, 422), exc  # a conflict or an invalid transition never changes anything
            continue
        after, _ = snapshot(store)
        live_consumers = {
            e["uid"]
            for e in (before.get("status") or {}).get("reservedFor") or []
            if pod_is_live(pods.get(e["name"])) and pods[e["name"]]["metadata"]["uid"] == e["uid"]
        }
        kept = {e["uid"] for e in ((after or {}).get("status") or {}).get("reservedFor") or []}
        assert live_consumers <= kept, f"{action} removed live consumers {live_consumers - kept}"
        in_use = live_consumers or any(pod_is_live(p) and pod_references_claim(p, "c1") for p in pods.values())
        if in_use and (before.get("status") or {}).get("allocation"):
            assert after is not None, f"{action} deleted a claim a live pod uses"
            assert after["status"].get("allocation") == before["status"]["allocation"], (
                f"{action} cleared an allocation in use"
            )
        if after is not None and (after.get("status") or {}).get("allocation"):
            # Never the finalizer while allocated: that leaks devices.
            assert FINALIZER in (after["metadata"].get("finalizers") or [])
