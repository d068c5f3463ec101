"""The live preview inventory (claims/live_inventory.py) equals a fresh rebuild after every change the
sync applies: creates, updates, deletes, relist reconciles. Changes go through the sync's own write
path (mirror.sync.apply) into PostgreSQL; the fresh rebuild reads every row again."""

import copy
import random
import threading

import pytest
from django.test import Client

from devcluster.fleet import generate_fleet
from dra import Features, Inventory, headroom, load_documents, preview, resolve_claims

CLAIMS = [
    ("gpu.nvidia.com", "count: 1"),
    ("gpu.nvidia.com", "count: 8"),
    ("mig.nvidia.com", "count: 2"),
    (
        "gpu.nvidia.com",
        "count: 2\n        selectors: [{cel: {expression: \"device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H')\"}}]",
    ),
]
KIND_OF_PLURAL = {
    "namespaces": "Namespace",
    "nodes": "Node",
    "deviceclasses": "DeviceClass",
    "resourceslices": "ResourceSlice",
    "resourceclaimtemplates": "ResourceClaimTemplate",
    "resourceclaims": "ResourceClaim",
}


def claim_yaml(cls, count):
    return f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: probe, namespace: team-00}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: {cls}
        {count}
"""


def verdicts(inv):
    """What previews and headroom say for several claims (timings removed)."""
    out = []
    for cls, count in CLAIMS:
        claims, bound = resolve_claims(inv, load_documents(claim_yaml(cls, count), "YAML"))
        result = preview(inv, claims, bound=bound, reason_codes=True)
        result["summary"].pop("seconds")
        room = headroom(inv, claims)
        room.pop("seconds")
        out.append((result, room))
    return out


def fresh(cluster):
    from claims.live_inventory import SOURCES, load_raw

    return Inventory(
        features=Features.from_dict(cluster.features),
        **{kw: load_raw(model, cluster.pk) for kw, model in SOURCES.values()},
    )


class Fleet:
    """A small devcluster fleet written through the sync's apply path, and random changes to it."""

    def __init__(self, cluster, seed=7):
        from mirror.sync.apply import LISTED, apply_batch

        self.cluster, self.rng, self.rv = cluster, random.Random(seed), 10_000
        self.objects = {}
        for plural, items in generate_fleet(nodes=20, claims=80, seed=seed).items():
            kind = KIND_OF_PLURAL.get(plural)
            if kind:
                self.objects[kind] = {self.key(r): r for r in items}
                apply_batch(cluster, kind, [(LISTED, r) for r in items])

    @staticmethod
    def key(raw):
        meta = raw["metadata"]
        return (meta.get("namespace") or "", meta["name"])

    def bump(self, raw):
        self.rv += 1
        raw["metadata"]["resourceVersion"] = str(self.rv)
        return raw

    def change(self, kind):
        """One random create, update or delete of `kind`, applied; returns the event."""
        from mirror.sync.apply import ADDED, DELETED, MODIFIED, apply_batch

        rng, objects = self.rng, self.objects[kind]
        key = rng.choice(sorted(objects))
        raw = copy.deepcopy(objects[key])
        roll = rng.random()
        if roll < 0.2:
            event = DELETED
            del objects[key]
        elif roll < 0.35:
            event = ADDED
            raw["metadata"]["name"] += f"-copy{self.rv}"
            raw["metadata"]["uid"] = f"uid-{self.rv}"
            if kind == "Node":
                raw["metadata"]["labels"]["kubernetes.io/hostname"] = raw["metadata"]["name"]
        else:
            event = MODIFIED
            self.modify(kind, raw)
        self.bump(raw)
        if event != DELETED:
            objects[self.key(raw)] = raw
        apply_batch(self.cluster, kind, [(event, raw)])
        return event

    def modify(self, kind, raw):
        rng = self.rng
        if kind == "ResourceClaim":
            status = raw.setdefault("status", {})
            if status.get("allocation"):
                status.pop("allocation")
                status.pop("reservedFor", None)
            else:
                sl = rng.choice(sorted(self.objects["ResourceSlice"].values(), key=lambda s: s["metadata"]["name"]))
                devices = sl["spec"].get("devices") or []
                if devices:
                    dev = rng.choice(devices)
                    status["allocation"] = {
                        "devices": {
                            "results": [
                                {
                                    "request": "gpu",
                                    "driver": sl["spec"]["driver"],
                                    "pool": sl["spec"]["pool"]["name"],
                                    "device": dev["name"],
                                }
                            ]
                        }
                    }
        elif kind == "ResourceSlice":
            devices = raw["spec"].get("devices")
            if devices and rng.random() < 0.5:
                devices.pop(rng.randrange(len(devices)))
            else:
                raw["spec"]["pool"]["generation"] = int(raw["spec"]["pool"].get("generation") or 0) + 1
        elif kind == "Node":
            raw["metadata"].setdefault("labels", {})["gpudash.io/node-pool"] = rng.choice(["a", "b"])
        elif kind == "DeviceClass":
            raw["spec"]["selectors"] = [
                {
                    "cel": {
                        "expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
                    }
                }
            ]
        else:
            raw["metadata"].setdefault("labels", {})["touched"] = str(self.rv)


@pytest.fixture
def fleet(db):
    from claims.live_inventory import forget
    from mirror.models import Cluster

    forget()
    yield Fleet(Cluster.objects.create(name="live"))
    forget()


def test_live_inventory_equals_a_rebuild_after_creates_updates_deletes(fleet):
    from claims.live_inventory import live_inventory
    from claims.preview import cluster_inventory

    cluster = fleet.cluster
    first = cluster_inventory(cluster)
    assert verdicts(first) == verdicts(fresh(cluster))
    kinds = ["ResourceClaim"] * 6 + ["ResourceSlice"] * 3 + ["Node"] * 2 + ["Namespace", "ResourceClaimTemplate"]
    for round_ in range(6):
        events = [fleet.change(fleet.rng.choice(kinds)) for _ in range(8)]
        if round_ == 3:
            events.append(fleet.change("DeviceClass"))
        live = cluster_inventory(cluster)
        got, want = verdicts(live), verdicts(fresh(cluster))
        if got != want:
            for (g, gh), (w, wh) in zip(got, want):
                for ge, we in zip(g["nodes"], w["nodes"]):
                    if ge != we:
                        print("GOT ", ge)
                        print("WANT", we)
                        break
                if gh != wh:
                    print("HEADROOM", gh, wh)
        assert got == want, f"round {round_}: {events}"
    state = live_inventory(cluster.pk)
    assert state.builds == 1  # every round was an update, never a rebuild
    assert state.updates == 6


def test_unchanged_devices_and_nodes_keep_their_cached_work(fleet):
    from claims.preview import cluster_inventory
    from mirror.sync.apply import MODIFIED, apply_batch

    cluster = fleet.cluster
    before = cluster_inventory(cluster)
    verdicts(before)
    claims = fleet.objects["ResourceClaim"]
    allocated = next(raw for _, raw in sorted(claims.items()) if (raw.get("status") or {}).get("allocation"))
    raw = fleet.bump(copy.deepcopy(allocated))
    raw["status"].pop("allocation")
    raw["status"].pop("reservedFor", None)
    apply_batch(cluster, "ResourceClaim", [(MODIFIED, raw)])
    after = cluster_inventory(cluster)
    assert after is not before
    device = next(d for d in before.devices_by_key.values() if d.sel_cache)
    assert after.devices_by_key[device.key] is device  # the same parsed device, CEL results included
    untouched = [n for n in before.node_names if n in after._views and after._views[n] is before._views.get(n)]
    assert len(untouched) >= len(before.node_names) - 2  # only the freed device's node view (if any) is rebuilt
    assert verdicts(after) == verdicts(fresh(cluster))


def test_relist_reconcile_keeps_the_live_inventory_equal(fleet):
    """After a 410 the watcher relists and deletes what the list lacks: the live inventory follows."""
    from claims.preview import cluster_inventory
    from mirror.sync.apply import LISTED, apply_batch, reconcile

    cluster = fleet.cluster
    cluster_inventory(cluster)
    for kind in ("ResourceClaim", "ResourceSlice", "Node"):
        objects = fleet.objects[kind]
        keep = sorted(objects)[: len(objects) * 2 // 3]
        listed = [fleet.bump(copy.deepcopy(objects[k])) for k in keep]
        if kind == "ResourceClaim":
            for raw in listed[:5]:
                (raw.get("status") or {}).pop("allocation", None)
        result = apply_batch(cluster, kind, [(LISTED, raw) for raw in listed])
        gone = reconcile(cluster, kind, result.seen_ids, fleet.rv)
        assert gone, kind  # the relist did remove rows
        fleet.objects[kind] = {fleet.key(raw): raw for raw in listed}
        assert verdicts(cluster_inventory(cluster)) == verdicts(fresh(cluster)), kind


def test_a_process_too_far_behind_rebuilds(fleet, monkeypatch):
    from claims.live_inventory import live_inventory
    from claims.preview import cluster_inventory
    from mirror.sync import changelog

    cluster = fleet.cluster
    cluster_inventory(cluster)
    monkeypatch.setattr(changelog, "KEEP", 2)
    monkeypatch.setattr(changelog, "_PRUNE_EVERY", 1)
    for _ in range(4):
        fleet.change("ResourceClaim")
    assert verdicts(cluster_inventory(cluster)) == verdicts(fresh(cluster))
    assert live_inventory(cluster.pk).builds == 2  # the log no longer reached back: one rebuild


def test_rolled_back_writes_leave_no_log_entry(fleet):
    from django.db import transaction

    from mirror.models import ChangeCursor, MirrorChange
    from mirror.sync.apply import MODIFIED, apply_batch

    cluster = fleet.cluster
    before = ChangeCursor.objects.get(cluster=cluster, kind="Node").seq
    node = fleet.bump(copy.deepcopy(next(iter(fleet.objects["Node"].values()))))
    with pytest.raises(RuntimeError), transaction.atomic():
        apply_batch(cluster, "Node", [(MODIFIED, node)])
        raise RuntimeError("the watcher lost its lease")
    assert ChangeCursor.objects.get(cluster=cluster, kind="Node").seq == before
    assert not MirrorChange.objects.filter(cluster=cluster, kind="Node", seq__gt=before).exists()
    apply_batch(cluster, "Node", [(MODIFIED, node)])
    entry = MirrorChange.objects.get(cluster=cluster, kind="Node", seq=before + 1)
    assert entry.keys == [["", node["metadata"]["name"]]]


@pytest.mark.django_db(transaction=True)
def test_concurrent_previews_during_updates_never_error():
    """Previews in several threads (own connections) while the sync commits changes: no errors, and
    once the writes stop the live inventory equals a rebuild."""
    from django.db import connection

    from claims.live_inventory import forget, live_inventory
    from claims.preview import run_preview
    from mirror.models import Cluster

    forget()
    fleet = Fleet(Cluster.objects.create(name="live-threads"), seed=11)
    cluster = fleet.cluster
    errors, done, counts = [], threading.Event(), []

    def previews():
        n = 0
        try:
            while not done.is_set():
                result = run_preview(
                    Cluster.objects.get(pk=cluster.pk),
                    yaml_text=claim_yaml(*CLAIMS[n % len(CLAIMS)]),
                    with_headroom=n % 4 == 0,
                )
                assert result["summary"]["nodes"] > 0
                n += 1
        except Exception as exc:  # reported below, with the thread's traceback
            errors.append(exc)
        finally:
            counts.append(n)
            connection.close()

    threads = [threading.Thread(target=previews) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(20):
            fleet.change(fleet.rng.choice(["ResourceClaim", "ResourceClaim", "ResourceSlice", "Node"]))
    finally:
        done.set()
        for t in threads:
            t.join(60)
    assert not errors, errors
    assert sum(counts) >= 2
    assert live_inventory(cluster.pk).updates >= 1
    from claims.preview import cluster_inventory

    assert verdicts(cluster_inventory(cluster)) == verdicts(fresh(cluster))
    forget()


def test_engine_updates_equal_a_rebuild_for_every_kind():
    """The engine alone (no database): random upserts and removals of every kind, DeviceTaintRules
    (by driver and by class) included, give the same verdicts as building from the same objects."""
    from dra.incremental import object_key

    features = Features(device_taint_rules=True)
    store = {
        kw: {}
        for kw in (
            "device_classes",
            "resource_slices",
            "resource_claims",
            "resource_claim_templates",
            "nodes",
            "namespaces",
            "device_taint_rules",
        )
    }
    plural = {
        "deviceclasses": "device_classes",
        "resourceslices": "resource_slices",
        "resourceclaims": "resource_claims",
        "resourceclaimtemplates": "resource_claim_templates",
        "nodes": "nodes",
        "namespaces": "namespaces",
    }
    for name, items in generate_fleet(nodes=12, claims=40, seed=3).items():
        if name in plural:
            store[plural[name]] = {object_key(plural[name], r): r for r in items}

    def rule(name, selector):
        return {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": {
                "deviceSelector": selector,
                "taint": {"key": "maintenance", "value": name, "effect": "NoSchedule"},
            },
        }

    def build():
        return Inventory(features=features, **{kw: [objs[k] for k in sorted(objs)] for kw, objs in store.items()})

    rng = random.Random(5)
    live = build()
    verdicts(live)
    for step in range(12):
        upserts, removals = {}, {}
        for _ in range(4):
            kind = rng.choice(
                ["resource_claims", "resource_slices", "nodes", "device_taint_rules", "namespaces", "device_classes"]
            )
            if kind == "device_taint_rules":
                raw = rule(
                    f"r{rng.randrange(3)}",
                    rng.choice(
                        [
                            {"pool": rng.choice(sorted(store["resource_slices"]))[:10]},
                            {"driver": "gpu.nvidia.com", "deviceClassName": "mig.nvidia.com"},
                        ]
                    ),
                )
            else:
                raw = copy.deepcopy(store[kind][rng.choice(sorted(store[kind]))])
            key = object_key(kind, raw)
            # One change per object and update (the live inventory never sends both for one key).
            upserts[kind] = [r for r in upserts.get(kind, []) if object_key(kind, r) != key]
            removals[kind] = [k for k in removals.get(kind, []) if k != key]
            if kind != "device_classes" and key in store[kind] and rng.random() < 0.25:
                del store[kind][key]
                removals[kind].append(key)
                continue
            if kind == "resource_claims" and (raw.get("status") or {}).get("allocation"):
                raw["status"].pop("allocation")
            elif kind == "resource_slices" and raw["spec"].get("devices"):
                raw["spec"]["devices"].pop()
            elif kind in ("nodes", "namespaces"):
                raw["metadata"].setdefault("labels", {})["step"] = str(step)
            store[kind][key] = raw
            upserts[kind].append(raw)
        live = live.with_changes(upserts, removals)
        assert verdicts(live) == verdicts(build()), f"step {step}: {upserts.keys()} {removals}"


def test_warm_up_builds_the_inventory_and_fills_class_selector_results(fleet):
    from claims.live_inventory import live_inventory, warm_up
    from claims.preview import run_preview

    cluster = fleet.cluster
    warm_up([cluster])
    state = live_inventory(cluster.pk)
    assert state.builds == 1
    inv = state.snapshot.inventory
    assert len(inv._views) == len(inv.node_names)  # every node's view is built
    assert any(d.sel_cache for d in inv.devices_by_key.values())  # class selectors evaluated
    run_preview(cluster, yaml_text=claim_yaml(*CLAIMS[0]))
    assert state.builds == 1 and state.snapshot.inventory is inv  # nothing changed: the same inventory


def test_shared_device_values_are_one_object_per_distinct_value_and_change_no_verdict():
    """live_inventory.share_device_values (memory of a big fleet): equal attribute and capacity values
    become one object; values of another type (True vs 1, 1 vs 1.0) and multi-key values stay apart."""
    from claims.live_inventory import share_device_values

    objects = generate_fleet(nodes=12, claims=40, seed=3)
    shared = copy.deepcopy(objects)
    share_device_values(shared["resourceslices"], {})
    devices = [d for s in shared["resourceslices"] for d in s["spec"].get("devices") or []]
    products = {id(d["attributes"]["productName"]) for d in devices if "productName" in d["attributes"]}
    assert len(products) == len(
        {d["attributes"]["productName"]["string"] for d in devices if "productName" in d["attributes"]}
    )
    assert shared == objects  # equal values, fewer objects
    assert verdicts(Inventory.from_objects(shared)) == verdicts(Inventory.from_objects(objects))

    odd = [
        {
            "spec": {
                "devices": [
                    {
                        "name": "a",
                        "attributes": {"x": {"bool": True}, "y": {"int": 1}, "z": {"int": 1}},
                        "capacity": {"m": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}},
                    },
                    {
                        "name": "b",
                        "attributes": {"x": {"int": 1}, "y": {"int": 1}, "z": {"int": 1.0}},
                        "capacity": {"m": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}},
                    },
                ]
            }
        }
    ]
    share_device_values(odd, {})
    a, b = odd[0]["spec"]["devices"]
    assert a["attributes"]["y"] is a["attributes"]["z"] is b["attributes"]["y"]
    assert a["attributes"]["x"] is not b["attributes"]["x"] and b["attributes"]["z"] is not b["attributes"]["y"]
    assert a["capacity"]["m"] is not b["capacity"]["m"]


def test_plain_devices_found_while_sharing_are_the_ones_projection_finds_not_odd():
    """share_device_values(plain=...) + Inventory(plain_devices=...) mark devices not odd without the
    per-device check of the first preview: only devices that check would also find not odd."""
    from claims.live_inventory import share_device_values
    from dra.projection import _compute_odd

    objects = generate_fleet(nodes=12, claims=40, seed=5)
    rows = copy.deepcopy(objects["resourceslices"])
    odd_values = [
        {"int": True},
        {"int": 1.0},
        {"version": "not-a-version"},
        {"strings": ["a"]},
        {"value": "1Gi"},
        "text",
        {"string": "a", "int": 1},
    ]
    odd_caps = [
        {"value": "lots"},
        {"string": "1Gi"},
        {"value": 3},
        {"value": "1Gi", "requestPolicy": {"default": "1Gi"}},
    ]
    devices = [d for s in rows for d in s["spec"].get("devices") or []]
    for i, value in enumerate(odd_values):
        devices[i]["attributes"]["odd"] = copy.deepcopy(value)
    for i, cap in enumerate(odd_caps):
        devices[len(odd_values) + i]["capacity"] = {"memory": copy.deepcopy(cap)}
    devices[21]["capacity"] = None
    devices[22]["attributes"] = {}
    plain = set()
    share_device_values(rows, {}, plain)
    rest = {
        "device_classes": objects["deviceclasses"],
        "nodes": objects["nodes"],
        "resource_claims": objects["resourceclaims"],
    }
    hinted = Inventory(resource_slices=rows, plain_devices=plain, **rest)
    checked = Inventory(resource_slices=copy.deepcopy(rows), **rest)
    marked = [d for d in hinted.devices_by_key.values() if d._odd is False]
    assert len(marked) == len(devices) - len(odd_values) - len(odd_caps)  # all but the odd ones
    assert all(_compute_odd(d) is False for d in marked)
    assert {d.key for d in marked} == {d.key for d in checked.devices_by_key.values() if _compute_odd(d) is False} - {
        d.key for d in hinted.devices_by_key.values() if d._odd is None
    }
    assert verdicts(hinted) == verdicts(checked)


@pytest.mark.django_db(transaction=True)
def test_start_warm_up_builds_without_a_preview_and_a_preview_during_the_build_waits_for_it(monkeypatch, settings):
    """The web process's warm-up (gpudash/asgi.py calls start_warm_up): the inventory is built and its
    caches filled with no preview asking; a preview that arrives while the build runs waits for that
    build (one build in all) and answers as a preview on a fresh inventory does."""
    from django.db import connection

    import claims.live_inventory as live_module
    from claims.live_inventory import LiveInventory, forget, live_inventory, start_warm_up
    from claims.preview import run_preview
    from mirror.models import Cluster

    forget()
    cluster = Fleet(Cluster.objects.create(name="live-warm"), seed=13).cluster
    monkeypatch.setattr(live_module, "_warm_up_thread", None)
    # The warm-up in this process, as a preview worker (or the `inline` backend) runs it; /readyz reports it.
    settings.GPUDASH_PREVIEW_SERVICE = {**settings.GPUDASH_PREVIEW_SERVICE, "BACKEND": "inline"}
    settings.GPUDASH_PREVIEW_WARM_UP = False
    assert start_warm_up() is None  # off: nothing starts
    settings.GPUDASH_PREVIEW_WARM_UP = True

    building, release, arrived = threading.Event(), threading.Event(), threading.Event()
    real_load, real_obtain = live_module.load_all, LiveInventory.obtain
    seen = []

    def held_load(cluster_id, plain=None):  # the warm-up's build waits here until released
        if threading.current_thread().name == "preview-warm-up":
            building.set()
            release.wait(60)
        return real_load(cluster_id, plain)

    def watched_obtain(self, cluster, features, deadline=None):
        if threading.current_thread().name == "user-preview":
            seen.append((self.snapshot, self.builds))
            arrived.set()
        return real_obtain(self, cluster, features, deadline)

    monkeypatch.setattr(live_module, "load_all", held_load)
    monkeypatch.setattr(LiveInventory, "obtain", watched_obtain)
    answers = []

    def user_preview():
        try:
            answers.append(run_preview(Cluster.objects.get(pk=cluster.pk), yaml_text=claim_yaml(*CLAIMS[0])))
        finally:
            connection.close()

    thread = start_warm_up()
    assert thread is not None and start_warm_up() is thread  # once per process
    try:
        assert building.wait(60)  # the build started, no preview asked for it
        probe = Client().get("/readyz")  # readiness waits for the warm-up: no traffic to a cold process
        assert probe.status_code == 503, probe.content
        assert probe.json()["checks"]["preview_inventory"].startswith(
            "error: RuntimeError: building the preview inventories ("
        )
        assert probe.json()["checks"]["database"] == "ok"
        assert live_module.warm_up_status()[0] == "warming"
        monkeypatch.setattr(live_module, "WARM_UP_READY_WAIT", 0.0)  # past the longest wait: served cold
        assert live_module.warm_up_status()[0] == "done" and Client().get("/readyz").status_code == 200
        monkeypatch.setattr(live_module, "WARM_UP_READY_WAIT", 300.0)
        user = threading.Thread(target=user_preview, name="user-preview")
        user.start()
        assert arrived.wait(60)
    finally:
        release.set()
    thread.join(120)
    user.join(120)
    probe = Client().get("/readyz")
    assert probe.status_code == 200 and probe.json()["checks"]["preview_inventory"] == "ok", probe.content
    state_name, seconds = live_module.warm_up_status()
    assert state_name == "done" and seconds > 0
    assert seen == [(None, 0)]  # it arrived during the build, before anything was published
    state = live_inventory(cluster.pk)
    assert state.builds == 1 and answers  # never a second build
    inv = state.snapshot.inventory
    assert len(inv._views) == len(inv.node_names)  # the warm-up filled the node views before publishing
    from dra.nodefilters import scheduling_pod

    documents = load_documents(claim_yaml(*CLAIMS[0]), "YAML")
    rebuilt = fresh(cluster)
    claims, bound = resolve_claims(rebuilt, documents)
    from claims.preview import engine_limits

    expected = preview(rebuilt, claims, bound=bound, pod=scheduling_pod(documents), **engine_limits())
    got = answers[0]
    obtained = got["summary"].pop("inventory")
    assert obtained["obtained"] == "waited" and obtained["waitSeconds"] > 0  # the warm-up's build, not its own
    for result in (got, expected):
        result["summary"].pop("seconds")
        result["summary"].pop("cluster", None)
    assert got == expected
    assert got["summary"]["nodes"] == len(inv.node_names) > 0
    forget()


@pytest.mark.django_db(transaction=True)
def test_rows_read_by_the_reader_thread_equal_the_rows_read_kind_by_kind(monkeypatch):
    """load_all (a reader thread streaming the rows while this thread parses them, PostgreSQL outside a
    transaction) gives the rows load_raw gives, in the same order, with the same plain devices; an
    error in the parsing thread stops the reader and is raised."""
    from django.db import connection

    import claims.live_inventory as live_module
    from claims.live_inventory import SOURCES, load_all, load_raw
    from mirror.models import Cluster

    if connection.vendor != "postgresql":
        pytest.skip("the reader thread is used on PostgreSQL only")
    cluster = Fleet(Cluster.objects.create(name="live-reader"), seed=17).cluster
    monkeypatch.setattr(live_module, "_CHUNK_ROWS", 3)  # many chunks, a full queue
    plain_threaded, plain_plain = set(), set()
    threaded = load_all(cluster.pk, plain_threaded)
    one_by_one = {kwarg: load_raw(model, cluster.pk, plain_plain) for kwarg, model in SOURCES.values()}
    assert threaded == one_by_one and threaded["resource_slices"] and threaded["resource_claims"]
    assert len(plain_threaded) == len(plain_plain) > 0

    def broken(model, rows, plain):
        def parse(chunk):
            raise RuntimeError("parse failed")

        return parse

    monkeypatch.setattr(live_module, "_parser", broken)
    with pytest.raises(RuntimeError, match="parse failed"):
        load_all(cluster.pk)
    assert not [t for t in threading.enumerate() if t.name == "preview-inventory-reader"]


def test_preview_says_how_it_got_its_inventory_and_waits_for_another_build_only_until_its_deadline(fleet, settings):
    """`summary.inventory` says whether this preview built the inventory, caught it up or found it
    current, and how long that took. A build held by another thread (the start-up warm-up) is waited
    for only until the preview's deadline: then a clear error with a retry hint (API: 503 + Retry-After),
    and malformed YAML is refused at once, without waiting at all."""
    import time

    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from claims.live_inventory import live_inventory
    from claims.preview import InventoryNotReady, PreviewError, run_preview

    cluster = fleet.cluster
    text = claim_yaml(*CLAIMS[0])
    first = run_preview(cluster, yaml_text=text)["summary"]["inventory"]
    assert first["obtained"] == "built" and first["waitSeconds"] >= first["buildSeconds"] > 0
    again = run_preview(cluster, yaml_text=text)["summary"]["inventory"]
    assert (
        again["obtained"] == "current"
        and again["buildSeconds"] == first["buildSeconds"]
        and again["builtAt"] == first["builtAt"]
    )
    fleet.change("ResourceClaim")
    updated = run_preview(cluster, yaml_text=text)["summary"]["inventory"]
    assert updated["obtained"] == "updated" and updated["builtAt"] == first["builtAt"]

    live = live_inventory(cluster.pk)
    live.snapshot = None  # as at start: the next preview needs a build ...
    live._update.acquire()  # ... and another thread is making it
    live.building_since = time.monotonic() - 2.0
    try:
        started = time.monotonic()
        with pytest.raises(InventoryNotReady) as caught:
            run_preview(cluster, yaml_text=text, deadline=0.3)
        assert 0.25 < time.monotonic() - started < 5
        message = str(caught.value)
        assert f"the preview inventory of cluster {cluster.name} is still being built (2." in message
        assert f"the last build took {first['buildSeconds']:.1f} s): try again in about" in message
        with pytest.raises(PreviewError, match="YAML") as bad:
            run_preview(cluster, yaml_text="kind: [unclosed", deadline=30)  # no wait for a malformed paste
        assert not isinstance(bad.value, InventoryNotReady)

        api = APIClient()
        api.force_login(User.objects.create_superuser("admin-live", password="x"))
        # This process's held build, through the API: the `inline` backend runs the preview here (a
        # preview worker answers the same error for its own build; tests/claims/test_preview_workers.py).
        settings.GPUDASH_PREVIEW_SERVICE = {**settings.GPUDASH_PREVIEW_SERVICE, "BACKEND": "inline"}
        with override_deadline(0.3):
            response = api.post("/api/v1/preview", {"cluster": cluster.name, "yaml": text}, format="json")
        assert response.status_code == 503, response.content
        assert response.json()["error"]["code"] == "inventory_building"
        assert "still being built" in response.json()["error"]["message"]
        assert int(response["Retry-After"]) >= 1
    finally:
        live.building_since = None
        live._update.release()
    after = run_preview(cluster, yaml_text=text)["summary"]["inventory"]
    assert after["obtained"] == "built"


class override_deadline:  # noqa: N801 - a context manager
    """settings.GPUDASH_ENGINE_LIMITS with another PREVIEW_DEADLINE for the block."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        from django.conf import settings

        self.saved = settings.GPUDASH_ENGINE_LIMITS
        settings.GPUDASH_ENGINE_LIMITS = {**self.saved, "PREVIEW_DEADLINE": self.seconds}

    def __exit__(self, *exc):
        from django.conf import settings

        settings.GPUDASH_ENGINE_LIMITS = self.saved
