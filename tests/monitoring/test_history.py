"""Fleet history (monitoring/history.py): the per-minute sample of the demo fleet equals counts computed
here from the scenario's raw objects; a second sample in a minute replaces it; pruning keeps the
retention; the REST API serves the series (per state, per model, per namespace, scoped)."""

import copy
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from devcluster.scenario import scenario_objects
from mirror.models import Cluster
from mirror.sync.apply import DELETED, apply_batch
from monitoring import history
from monitoring.models import FleetSample, NamespaceSample
from tests.fleet_data import load_scenario, make_user

pytestmark = pytest.mark.django_db


def expected(objects):
    """From the raw objects: per (model, kind) devices, held devices, unheld ones on NotReady nodes,
    physical GPUs and free ones; per namespace held devices by kind and claims by state."""
    ready = {
        n["metadata"]["name"]
        for n in objects["nodes"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    }
    results = [
        (c["metadata"]["namespace"], (r["driver"], r["pool"], r["device"]))
        for c in objects["resourceclaims"]
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        if not r.get("adminAccess")
    ]
    held = {key: ns for ns, key in results}
    devices = {}  # key -> (model, kind, node, physical GPU, tainted)
    for s in objects["resourceslices"]:
        spec = s["spec"]
        for d in spec.get("devices", []):
            attrs = d.get("attributes", {})
            t = attrs.get("type", {}).get("string")
            kind = "gpu" if t == "gpu" else "partition" if t == "mig" else "other"
            physical = (
                attrs.get("uuid" if kind == "gpu" else "parentUUID", {}).get("string") if kind != "other" else None
            )
            tainted = any(x["effect"] in ("NoSchedule", "NoExecute") for x in d.get("taints", []))
            model = (attrs.get("productName") or attrs.get("model") or {}).get("string", "")
            devices[(spec["driver"], spec["pool"]["name"], d["name"])] = (
                model,
                kind,
                spec.get("nodeName", ""),
                physical,
                tainted,
            )
    per = defaultdict(Counter)
    busy = defaultdict(bool)  # (node, physical GPU) -> some device of it (the GPU or a partition) held or tainted
    for key, (model, kind, node, physical, tainted) in devices.items():
        c = per[(model, kind)]
        c["total"] += 1
        if key in held:
            c["held"] += 1
        elif tainted:
            c["tainted"] += 1
        elif node not in ready:
            c["unready"] += 1
        if physical:
            busy[(node, physical)] |= key in held or tainted
    for key, (model, kind, node, physical, tainted) in devices.items():
        if kind == "gpu":
            per[(model, kind)]["gpus"] += 1
            per[(model, kind)]["gpus_free"] += node in ready and not busy[(node, physical)]
    spaces = defaultdict(Counter)
    for key, ns in held.items():
        if key in devices:  # an allocation may name a device no slice publishes (any more)
            spaces[ns][devices[key][1]] += 1
    for c in objects["resourceclaims"]:
        status = c.get("status") or {}
        state = (
            "deleting"
            if c["metadata"].get("deletionTimestamp")
            else "reserved"
            if status.get("reservedFor")
            else "claims_allocated"
            if status.get("allocation")
            else "pending"
        )
        spaces[c["metadata"]["namespace"]][state] += 1
    return per, spaces


def reserved_claim(objects, namespace):
    return next(
        c
        for c in objects["resourceclaims"]
        if c["metadata"]["namespace"] == namespace
        and (c.get("status") or {}).get("reservedFor")
        and not c["metadata"].get("deletionTimestamp")
    )


@pytest.fixture
def demo():
    return load_scenario(Cluster.objects.create(name="demo")), scenario_objects("demo")


@pytest.mark.sqlite_default  # the ORM upsert of the embedded default
def test_sample_equals_counts_from_the_objects(demo):
    cluster, objects = demo
    per, spaces = expected(objects)
    now = timezone.now().replace(second=20, microsecond=0)
    assert history.sample(now) == len(per) + len(spaces)
    rows = {(r.model, r.kind): r for r in FleetSample.objects.filter(cluster=cluster, minute=now.replace(second=0))}
    assert set(rows) == set(per)
    for key, c in per.items():
        r = rows[key]
        states = {s: getattr(r, s) for s in history.STATE_FIELDS}
        assert sum(states.values()) == c["total"], (key, states, c)
        # No findings were computed: held devices are allocated (the demo has no shares or admin access).
        assert (r.allocated + r.stuck + r.admin, r.tainted, r.unhealthy) == (c["held"], c["tainted"], c["unready"]), (
            key,
            states,
            c,
        )
        assert (r.gpus, r.gpus_free) == (c["gpus"], c["gpus_free"]), (key, c)
    got = {r.namespace: r for r in NamespaceSample.objects.filter(cluster=cluster)}
    assert set(got) == set(spaces)
    for ns, c in spaces.items():
        fields = ("gpu", "partition", "other", "pending", "claims_allocated", "reserved", "deleting")
        assert {f: getattr(got[ns], f) for f in fields} == {f: c[f] for f in fields}, ns
    assert (
        sum(r.partition for r in got.values()) > 0 and sum(r.other for r in got.values()) > 0
    )  # MIG and NICs are held

    # Again in the same minute, after a claim is gone: that minute is replaced, not doubled.
    claim = reserved_claim(objects, "research")
    apply_batch(cluster, "ResourceClaim", [(DELETED, copy.deepcopy(claim))])
    objects["resourceclaims"] = [c for c in objects["resourceclaims"] if c is not claim]
    per, spaces = expected(objects)
    history.sample(now + timedelta(seconds=30))
    assert FleetSample.objects.filter(cluster=cluster).count() == len(per)
    research = NamespaceSample.objects.get(cluster=cluster, namespace="research")
    assert (research.reserved, research.partition) == (spaces["research"]["reserved"], spaces["research"]["partition"])


def test_prune_keeps_the_retention_and_refuses_bad_settings(demo, settings):
    cluster, _ = demo
    now = timezone.now().replace(second=0, microsecond=0)
    for age in (timedelta(days=3), timedelta(days=2, minutes=1), timedelta(days=1), timedelta(minutes=5), timedelta(0)):
        history.sample(now - age)
    settings.GPUDASH_MONITORING = {**settings.GPUDASH_MONITORING, "HISTORY_DAYS": "2"}
    from monitoring.tasks import prune_history

    deleted = prune_history.apply().get()["history"]
    kept = sorted(set(FleetSample.objects.values_list("minute", flat=True)))
    assert kept == [now - timedelta(days=1), now - timedelta(minutes=5), now]
    assert sorted(set(NamespaceSample.objects.values_list("minute", flat=True))) == kept
    per_minute = FleetSample.objects.filter(minute=now).count() + NamespaceSample.objects.filter(minute=now).count()
    assert deleted == 2 * per_minute
    for bad in ("two weeks", "0", "-1", "nan"):
        settings.GPUDASH_MONITORING = {**settings.GPUDASH_MONITORING, "HISTORY_DAYS": bad}
        with pytest.raises(ValueError, match="GPUDASH_HISTORY_DAYS"):
            history.prune()


@pytest.mark.sqlite_default  # the chart queries on SQLite (strftime for the epoch)
def test_api_serves_the_series(demo):
    cluster, objects = demo
    end = history.points(1)[1][-1]  # the newest chart point: samples there and 2 and 10 minutes before
    for minutes_ago in (10, 2, 0):
        if minutes_ago == 2:  # the fleet changes in between: a research claim goes
            claim = reserved_claim(objects, "research")
            apply_batch(cluster, "ResourceClaim", [(DELETED, copy.deepcopy(claim))])
        history.sample(end - timedelta(minutes=minutes_ago))
    by_minute = {
        m: {(r.model, r.kind): r for r in FleetSample.objects.filter(minute=m)}
        for m in FleetSample.objects.values_list("minute", flat=True)
    }

    api = APIClient()
    api.force_authenticate(make_user("viewer", "viewer"))

    def get(path, **params):  # the span ends at `end`, whatever minute the request runs in
        return api.get(path, {"end": int(end.timestamp()), **params}).json()

    body = get("/api/v1/history/devices", hours=1, kind="gpu")
    assert (
        body["step_seconds"] == 60 and len(body["timestamps"]) == 61 and body["timestamps"][-1] == int(end.timestamp())
    )
    series = {s["name"]: s["values"] for s in body["series"]}
    assert list(series) == list(history.STATE_FIELDS)
    at = {int(m.timestamp()): rows for m, rows in by_minute.items()}
    for i, ts in enumerate(body["timestamps"]):
        for state, values in series.items():
            want = sum(getattr(r, state) for (_, kind), r in at[ts].items() if kind == "gpu") if ts in at else None
            assert values[i] == want, (state, ts)

    body = get("/api/v1/history/devices", hours=1, series="gpus_free", group_by="model", cluster="demo")
    free = {s["name"]: s["values"][-1] for s in body["series"]}
    want = Counter()
    for (model, _kind), r in by_minute[end].items():
        want[model] += r.gpus_free
    assert free == {model: n for model, n in want.items() if n}  # models with no free GPU throughout (NICs) left out

    body = get("/api/v1/history/namespaces", hours=1, series="claims_reserved")
    last = {s["name"]: s["values"][-1] for s in body["series"]}
    ten_ago = {s["name"]: s["values"][-11] for s in body["series"]}
    assert last == {r.namespace: r.reserved for r in NamespaceSample.objects.filter(minute=end)}
    assert ten_ago["research"] == last["research"] + 1
    body = get("/api/v1/history/namespaces", hours=1, namespace="research", series="gpu,partition")
    assert [s["name"] for s in body["series"]] == ["gpu", "partition"]
    assert body["series"][1]["values"][-1] == NamespaceSample.objects.get(minute=end, namespace="research").partition

    # A scoped user sees only its namespaces, asked for or not.
    scoped = APIClient()
    scoped.force_authenticate(make_user("scoped", "viewer", namespaces=["inference"]))
    assert [
        s["name"]
        for s in scoped.get("/api/v1/history/namespaces", {"hours": 1, "end": int(end.timestamp())}).json()["series"]
    ] == ["inference"]
    assert scoped.get("/api/v1/history/namespaces", {"namespace": "research"}).json()["series"] == []

    for params in (
        {"hours": "0"},
        {"hours": "100000"},
        {"hours": "x"},
        {"series": "bogus"},
        {"group_by": "node"},
        {"cluster": "nope"},
        {"kind": "nic"},
        {"colour": "x"},
        {"end": "-5"},
        {"end": "99999999999"},
    ):
        r = api.get("/api/v1/history/devices", params)
        assert r.status_code == 400, (params, r.content)
    assert api.get("/api/v1/history/namespaces", {"top": "0"}).status_code == 400
    paths = api.get("/api/schema/?format=json").json()["paths"]
    assert {"group_by", "series", "kind", "hours"} <= {
        p["name"] for p in paths["/api/v1/history/devices"]["get"]["parameters"]
    }
    assert "/api/v1/history/namespaces" in paths


def test_chart_points_are_epoch_aligned_and_bounded():
    now = timezone.now()
    for hours, step in ((1, 1), (24, 2), (168, 15), (336, 30)):
        got_step, minutes = history.points(hours, now)
        assert got_step == step and len(minutes) <= history.MAX_POINTS + 1
        assert all(int(m.timestamp()) % (step * 60) == 0 for m in minutes) and minutes[-1] <= now
        assert minutes[-1] - minutes[0] == timedelta(minutes=step * (len(minutes) - 1))


@pytest.mark.django_db(transaction=True)
def test_the_embedded_mode_samples_on_a_thread_of_its_own():
    """Without Redis there is no beat: `manage.py serve` starts monitoring/periodic.py's thread."""
    import threading

    from monitoring import periodic
    from tests.browser import wait_until
    from tests.fleet_data import apply_all, meta

    cluster = Cluster.objects.create(name="embedded")
    apply_all(
        cluster,
        [
            (
                "ResourceSlice",
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": meta("s1"),
                    "spec": {
                        "driver": "gpu.example.com",
                        "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                        "allNodes": True,
                        "devices": [
                            {
                                "name": "gpu-0",
                                "attributes": {"type": {"string": "gpu"}, "productName": {"string": "Example"}},
                            }
                        ],
                    },
                },
            )
        ],
    )
    stop = threading.Event()
    thread = threading.Thread(target=periodic.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: FleetSample.objects.filter(cluster=cluster).exists(), 30, "the thread's first sample")
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    [row] = FleetSample.objects.filter(cluster=cluster)
    assert (row.model, row.kind, row.free, row.gpus, row.gpus_free) == ("Example", "gpu", 1, 1, 1)
