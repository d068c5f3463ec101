"""The built-in API server, driven by the real `kubernetes` client over HTTP."""

import json
import threading
import time

import pytest
import urllib3
from kubernetes import client, config, watch

from devcluster import scheduler
from devcluster.churn import MAX_PENDING, Churn
from devcluster.fleet import generate_fleet
from devcluster.scenario import ScenarioError, load_scenario, scenario_objects
from devcluster.store import Store
from devcluster.testing import raw_json, running_devcluster

MERGE = "application/merge-patch+json"


@pytest.fixture
def dc():
    with running_devcluster(bookmark_interval=0.2) as server:
        server.store.create("namespaces", {"metadata": {"name": "ns1"}})
        yield server


def claim(name, ns="ns1", **status):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": status,
    }


def read_watch(response, stop_after=None):
    """Parse watch lines until the server closes the stream (or stop_after events)."""
    events = []
    for line in _lines(response):
        events.append(json.loads(line))
        if stop_after and len(events) >= stop_after:
            break
    return events


def _lines(response):
    buffer = b""
    for chunk in response.stream(4096):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line


def test_list_pagination_is_consistent_at_the_first_pages_version(dc):
    for i in range(7):
        dc.store.create("resourceclaims", claim(f"c{i}"))
    api = client.ResourceV1Api(dc.api_client())
    first = raw_json(api.list_resource_claim_for_all_namespaces(limit=3, _preload_content=False))
    rv = first["metadata"]["resourceVersion"]
    assert [i["metadata"]["name"] for i in first["items"]] == ["c0", "c1", "c2"]
    assert "kind" not in first["items"][0]  # like a real apiserver's JSON list items
    # changes after the first page do not leak into later pages of the same list
    dc.store.delete("resourceclaims", "ns1", "c5")
    dc.store.create("resourceclaims", claim("c3a"))
    names = []
    token = first["metadata"]["continue"]
    while token:
        page = raw_json(api.list_resource_claim_for_all_namespaces(limit=3, _continue=token, _preload_content=False))
        assert page["metadata"]["resourceVersion"] == rv
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
    assert names == ["c3", "c4", "c5", "c6"]
    now = raw_json(api.list_namespaced_resource_claim("ns1", _preload_content=False))
    assert [i["metadata"]["name"] for i in now["items"]] == ["c0", "c1", "c2", "c3", "c3a", "c4", "c6"]


def test_expired_continue_token_is_410_with_a_fresh_token(dc):
    for i in range(4):
        dc.store.create("resourceclaims", claim(f"c{i}"))
    api = client.ResourceV1Api(dc.api_client())
    first = raw_json(api.list_resource_claim_for_all_namespaces(limit=2, _preload_content=False))
    dc.store.create("resourceclaims", claim("late"))
    dc.compact()
    with pytest.raises(client.ApiException) as err:
        api.list_resource_claim_for_all_namespaces(limit=2, _continue=first["metadata"]["continue"])
    assert err.value.status == 410
    body = json.loads(err.value.body)
    assert body["reason"] == "Expired" and body["metadata"]["continue"]
    rest = raw_json(
        api.list_resource_claim_for_all_namespaces(_continue=body["metadata"]["continue"], _preload_content=False)
    )
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c2", "c3", "late"]


def test_selectors_filter_lists(dc):
    dc.store.create(
        "resourceclaims", {**claim("a"), "metadata": {"name": "a", "namespace": "ns1", "labels": {"team": "x"}}}
    )
    dc.store.create("resourceclaims", claim("b"))
    api = client.ResourceV1Api(dc.api_client())
    by_label = raw_json(
        api.list_namespaced_resource_claim("ns1", label_selector="team in (x,y)", _preload_content=False)
    )
    by_field = raw_json(
        api.list_resource_claim_for_all_namespaces(field_selector="metadata.name=b", _preload_content=False)
    )
    assert [i["metadata"]["name"] for i in by_label["items"]] == ["a"]
    assert [i["metadata"]["name"] for i in by_field["items"]] == ["b"]


def test_watch_from_version_streams_changes_bookmarks_and_ends_at_timeout(dc):
    created = dc.store.create("resourceclaims", claim("w1"))
    api = client.ResourceV1Api(dc.api_client())
    start_rv = created["metadata"]["resourceVersion"]
    resp = api.list_resource_claim_for_all_namespaces(
        watch=True, resource_version=start_rv, allow_watch_bookmarks=True, timeout_seconds=1, _preload_content=False
    )
    assert dc.wait_for_watches("resourceclaims")
    dc.store.patch(
        "resourceclaims",
        "ns1",
        "w1",
        {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}},
        MERGE,
        "status",
    )
    dc.store.create("resourceclaims", claim("w2"))
    dc.store.delete("resourceclaims", "ns1", "w2")
    events = read_watch(resp)  # returns because the server ends the stream after timeoutSeconds
    changes = [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]
    assert changes == [("MODIFIED", "w1"), ("ADDED", "w2"), ("DELETED", "w2")]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, "allowWatchBookmarks with a 0.2 s interval must send bookmarks within 1 s"
    assert bookmarks[-1]["object"]["metadata"]["resourceVersion"] == str(dc.store.resource_version)
    assert bookmarks[-1]["object"]["kind"] == "ResourceClaim"
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events if e["type"] != "BOOKMARK"]
    assert rvs == sorted(rvs) and rvs[0] > int(start_rv)


def test_watch_without_version_starts_with_current_state(dc):
    dc.store.create("resourceclaims", claim("x"))
    api = client.ResourceV1Api(dc.api_client())
    events = read_watch(
        api.list_resource_claim_for_all_namespaces(watch=True, timeout_seconds=1, _preload_content=False)
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "x")]


def test_watch_from_compacted_version_is_410(dc):
    old = dc.store.create("resourceclaims", claim("old"))["metadata"]["resourceVersion"]
    dc.store.create("resourceclaims", claim("new"))
    dc.compact()
    api = client.ResourceV1Api(dc.api_client())
    with pytest.raises(client.ApiException) as err:
        api.list_resource_claim_for_all_namespaces(watch=True, resource_version=old, _preload_content=False)
    assert err.value.status == 410 and json.loads(err.value.body)["reason"] == "Expired"
    # the real apiserver's form: HTTP 200 and one ERROR event carrying the 410 Status
    dc.watch_expired_as_event = True
    events = read_watch(
        api.list_resource_claim_for_all_namespaces(watch=True, resource_version=old, _preload_content=False)
    )
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
    assert "too old resource version" in events[0]["object"]["message"]


def test_in_stream_expiry_and_the_official_watch_helper(dc):
    rv = dc.store.create("resourceclaims", claim("a"))["metadata"]["resourceVersion"]
    api = client.ResourceV1Api(dc.api_client())
    resp = api.list_resource_claim_for_all_namespaces(
        watch=True, resource_version=rv, timeout_seconds=5, _preload_content=False
    )
    assert dc.wait_for_watches("resourceclaims")
    dc.store.create("resourceclaims", claim("b"))
    dc.compact(expire_watches=True)
    events = read_watch(resp)
    assert [e["type"] for e in events] == ["ADDED", "ERROR"]
    assert events[1]["object"]["code"] == 410
    # kubernetes.watch.Watch raises ApiException(410) for a compacted version: callers must relist.
    # (Pods: the helper cannot map resource.k8s.io/v1 list types to its model names.)
    core = client.CoreV1Api(dc.api_client())
    with pytest.raises(client.ApiException) as err:
        for _ in watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=2):
            pass
    assert err.value.status == 410


def _padded_backlog(dc, count, pad=3000):
    """`count` ADDED claims after the returned resourceVersion, each ~pad bytes on the wire: far more
    than the loopback socket buffers hold, so a reader that pauses makes the server wait in writes."""
    rv = dc.store.resource_version
    filler = "x" * pad
    for i in range(count):
        obj = claim(f"b{i:05d}")
        obj["metadata"]["annotations"] = {"test/filler": filler}
        dc.store.create("resourceclaims", obj)
    return rv


def _watch_lines(resp):
    buffer = b""
    for chunk in resp.stream(64 * 1024):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        yield from (json.loads(line) for line in lines if line.strip())


def test_long_backlog_ends_cleanly_at_timeout_and_resumes_without_gaps(dc):
    # Regression: a watch from an old version streamed its whole backlog whatever timeoutSeconds
    # said (a 1 s watch ran for minutes with a slow reader). Like the apiserver, the timeout counts
    # from the request: the server stops between backlog chunks and ends the stream with the
    # terminating chunk, so the client sees a clean end (not "Response ended prematurely") and
    # resumes from the last version it got.
    count = 20000
    from_rv = _padded_backlog(dc, count)
    api = client.ResourceV1Api(dc.api_client())
    resp = api.list_resource_claim_for_all_namespaces(
        watch=True, resource_version=str(from_rv), timeout_seconds=1, _preload_content=False, _request_timeout=(5, 30)
    )
    events = []
    for event in _watch_lines(resp):  # raises urllib3 ProtocolError if the stream is cut
        events.append(event)
        if len(events) == 100:
            time.sleep(1.5)  # a slow consumer: the deadline passes while the server waits to write
    assert events and all(e["type"] == "ADDED" for e in events)
    assert len(events) < count, "the backlog outlived timeoutSeconds"
    names = [e["object"]["metadata"]["name"] for e in events]
    assert names == [f"b{i:05d}" for i in range(len(events))]  # a prefix: nothing skipped
    # resuming from the last version seen delivers exactly the rest
    last_rv = events[-1]["object"]["metadata"]["resourceVersion"]
    rest = []
    for _ in range(20):  # each resumed watch may be cut at its own timeout too
        resp = api.list_resource_claim_for_all_namespaces(
            watch=True, resource_version=last_rv, timeout_seconds=2, _preload_content=False, _request_timeout=(5, 30)
        )
        for event in _watch_lines(resp):
            rest.append(event)
            last_rv = event["object"]["metadata"]["resourceVersion"]
            if len(events) + len(rest) == count:
                break
        resp.close()
        if len(events) + len(rest) == count:
            break
    assert [e["object"]["metadata"]["name"] for e in rest] == [f"b{i:05d}" for i in range(len(events), count)]


def test_failure_inside_an_open_watch_ends_with_an_error_event(dc, monkeypatch):
    # Regression: an exception after the headers went out made the handler answer a 500 Status,
    # which aiohttp wrote into the chunked body ("InvalidChunkLength: HTTP/1.1 500 ..."). Now the
    # stream ends like an apiserver's failed watch: an ERROR event, then the terminating chunk.
    rv = dc.store.resource_version
    dc.store.create("resourceclaims", claim("ok"))
    dc.store.create("resourceclaims", claim("poison"))
    encode = dc._event_line

    def failing_encode(kind, event):  # stands in for a server bug hit by one object
        if event.obj["metadata"]["name"] == "poison":
            raise ValueError("cannot encode")
        return encode(kind, event)

    monkeypatch.setattr(dc, "_event_line", failing_encode)
    api = client.ResourceV1Api(dc.api_client())
    events = read_watch(
        api.list_resource_claim_for_all_namespaces(
            watch=True, resource_version=str(rv), timeout_seconds=5, _preload_content=False
        )
    )
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 500 and "cannot encode" in events[0]["object"]["message"]
    # The server forgets the stream just after writing its last chunk, which the client may see first.
    deadline = time.monotonic() + 5
    while dc.open_watches("resourceclaims") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert dc.open_watches("resourceclaims") == 0


def test_close_and_abort_watches(dc):
    api = client.ResourceV1Api(dc.api_client())

    def open_watch():
        resp = api.list_resource_claim_for_all_namespaces(
            watch=True, resource_version=str(dc.store.resource_version), timeout_seconds=30, _preload_content=False
        )
        assert dc.wait_for_watches("resourceclaims")
        dc.store.create("resourceclaims", claim(f"c{dc.store.resource_version}"))
        return resp

    resp = open_watch()
    dc.close_watches("resourceclaims")
    assert [e["type"] for e in read_watch(resp)] == ["ADDED"]  # clean end: no exception
    resp = open_watch()
    dc.abort_watches("resourceclaims")
    events = []
    with pytest.raises(urllib3.exceptions.ProtocolError, match="ended prematurely"):
        for line in _lines(resp):
            events.append(json.loads(line))
    assert [e["type"] for e in events] == ["ADDED"]  # what was queued before the cut arrived


def test_status_patch_with_stale_resource_version_conflicts(dc):
    rv = dc.store.create("resourceclaims", claim("s"))["metadata"]["resourceVersion"]
    api = client.ResourceV1Api(dc.api_client())
    body = {
        "metadata": {"resourceVersion": rv},
        "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]},
    }
    ok = raw_json(
        api.patch_namespaced_resource_claim_status("s", "ns1", body, _content_type=MERGE, _preload_content=False)
    )
    assert ok["status"]["reservedFor"][0]["uid"] == "u1" and int(ok["metadata"]["resourceVersion"]) > int(rv)
    with pytest.raises(client.ApiException) as err:
        api.patch_namespaced_resource_claim_status("s", "ns1", body, _content_type=MERGE)
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    # the main resource ignores status; the status subresource ignores everything else
    api.patch_namespaced_resource_claim(
        "s", "ns1", {"metadata": {"labels": {"a": "b"}}, "status": {}}, _content_type=MERGE
    )
    stored = dc.store.get("resourceclaims", "ns1", "s")
    assert stored["status"]["reservedFor"] and stored["metadata"]["labels"] == {"a": "b"}
    api.patch_namespaced_resource_claim_status("s", "ns1", {"metadata": {"labels": {"a": "c"}}}, _content_type=MERGE)
    assert dc.store.get("resourceclaims", "ns1", "s")["metadata"]["labels"] == {"a": "b"}
    # JSON patch with a failing test op is refused (422) and changes nothing
    with pytest.raises(client.ApiException) as err:
        api.patch_namespaced_resource_claim_status(
            "s",
            "ns1",
            [
                {"op": "test", "path": "/status/reservedFor/0/uid", "value": "other"},
                {"op": "remove", "path": "/status/reservedFor/0"},
            ],
            _content_type="application/json-patch+json",
        )
    assert err.value.status == 422
    assert dc.store.get("resourceclaims", "ns1", "s")["status"]["reservedFor"]


def test_strategic_merge_deletes_one_reserved_for_entry(dc):
    dc.store.create(
        "resourceclaims",
        claim(
            "r",
            reservedFor=[
                {"resource": "pods", "name": "p1", "uid": "u1"},
                {"resource": "pods", "name": "p2", "uid": "u2"},
            ],
        ),
    )
    api = client.ResourceV1Api(dc.api_client())
    api.patch_namespaced_resource_claim_status(
        "r",
        "ns1",
        {"status": {"reservedFor": [{"uid": "u1", "$patch": "delete"}]}},
        _content_type="application/strategic-merge-patch+json",
    )
    assert dc.store.get("resourceclaims", "ns1", "r")["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p2", "uid": "u2"}
    ]


def test_finalizers_hold_deletion_until_removed(dc):
    dc.store.create(
        "resourceclaims",
        {
            **claim("f"),
            "metadata": {"name": "f", "namespace": "ns1", "finalizers": ["resource.kubernetes.io/delete-protection"]},
        },
    )
    api = client.ResourceV1Api(dc.api_client())
    pending = raw_json(api.delete_namespaced_resource_claim("f", "ns1", _preload_content=False))
    assert pending["metadata"]["deletionTimestamp"]
    assert dc.store.get("resourceclaims", "ns1", "f")["metadata"]["deletionTimestamp"]
    api.patch_namespaced_resource_claim(
        "f",
        "ns1",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["resource.kubernetes.io/delete-protection"]}},
        _content_type="application/strategic-merge-patch+json",
    )
    assert dc.store.find("resourceclaims", "ns1", "f") is None
    types = [e.type for e in dc.store.events_since("resourceclaims", 0)]
    assert types == ["ADDED", "MODIFIED", "DELETED"]
    with pytest.raises(client.ApiException) as err:
        api.read_namespaced_resource_claim("f", "ns1")
    assert err.value.status == 404 and json.loads(err.value.body)["reason"] == "NotFound"


def test_create_conflicts_and_uid_preconditions(dc):
    api = client.ResourceV1Api(dc.api_client())
    created = raw_json(
        api.create_namespaced_resource_claim(
            "ns1", claim("n", reservedFor=[{"resource": "pods", "name": "p", "uid": "x"}]), _preload_content=False
        )
    )
    assert not created.get("status")  # status is not settable on create
    with pytest.raises(client.ApiException) as err:
        api.create_namespaced_resource_claim("ns1", claim("n"))
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "AlreadyExists"
    with pytest.raises(client.ApiException) as err:
        api.patch_namespaced_resource_claim(
            "n", "ns1", {"metadata": {"uid": "wrong", "labels": {"a": "b"}}}, _content_type=MERGE
        )
    assert err.value.status == 409


def test_wrong_token_is_401():
    with running_devcluster(token="secret") as server:
        good = client.CoreV1Api(server.api_client())
        assert raw_json(good.list_node(_preload_content=False))["items"] == []
        with pytest.raises(client.ApiException) as err:
            client.CoreV1Api(server.api_client(token="wrong")).list_node()
        assert err.value.status == 401 and json.loads(err.value.body)["reason"] == "Unauthorized"


def test_fault_injection_and_discovery_changes(dc):
    api = client.ResourceV1Api(dc.api_client())
    dc.fail_next(1, status=503, path_prefix="/apis/resource.k8s.io/v1/resourceslices")
    with pytest.raises(client.ApiException) as err:
        api.list_resource_slice()
    assert err.value.status == 503
    dc.garbage_next(1)
    resp = api.list_resource_slice(_preload_content=False)
    with pytest.raises(ValueError):
        json.loads(resp.data)
    assert raw_json(api.list_resource_slice(_preload_content=False))["items"] == []  # faults are used up

    apis = client.ApisApi(dc.api_client())
    dc.disable_group("resource.k8s.io")
    assert "resource.k8s.io" not in [g.name for g in apis.get_api_versions().groups]
    with pytest.raises(client.ApiException) as err:
        api.list_resource_slice()
    assert err.value.status == 404
    dc.enable_group("resource.k8s.io")
    dc.enable_devicetaintrules()
    group = [g for g in apis.get_api_versions().groups if g.name == "resource.k8s.io"][0]
    assert [v.version for v in group.versions] == ["v1", "v1beta2"]
    beta = client.ResourceV1beta2Api(dc.api_client())
    assert raw_json(beta.list_device_taint_rule(_preload_content=False))["items"] == []


def test_injected_lines_reach_open_watches(dc):
    api = client.ResourceV1Api(dc.api_client())
    rv = str(dc.store.resource_version)
    resp = api.list_resource_claim_for_all_namespaces(
        watch=True, resource_version=rv, timeout_seconds=1, _preload_content=False
    )
    assert dc.wait_for_watches("resourceclaims")
    dc.inject_watch_line("resourceclaims", '{"type":"ADDED","object":{"metadata":')
    dc.store.create("resourceclaims", claim("after"))
    lines = list(_lines(resp))
    assert lines[0] == b'{"type":"ADDED","object":{"metadata":'
    assert json.loads(lines[1])["object"]["metadata"]["name"] == "after"


def test_restart_keeps_port_and_state(dc):
    api = client.ResourceV1Api(dc.api_client())
    dc.store.create("resourceclaims", claim("kept"))
    resp = api.list_resource_claim_for_all_namespaces(watch=True, _preload_content=False)
    assert dc.wait_for_watches("resourceclaims")
    url = dc.url
    box = {}
    reader = threading.Thread(target=lambda: box.setdefault("events", read_watch(resp)))
    reader.start()
    dc.restart()
    reader.join(10)
    assert not reader.is_alive(), "a restart must end open watch streams"
    assert dc.url == url
    names = [
        i["metadata"]["name"]
        for i in raw_json(api.list_resource_claim_for_all_namespaces(_preload_content=False))["items"]
    ]
    assert names == ["kept"]


def test_kubeconfig_loads_with_the_official_loader(tmp_path):
    with running_devcluster(token="t0k") as server:
        path = server.write_kubeconfig(tmp_path / "kc.yaml", context="dev")
        api_client = config.new_client_from_config(config_file=str(path), context="dev")
        assert client.VersionApi(api_client).get_code().git_version.startswith("v1.36")


def test_demo_scenario_is_consistent_and_parses_with_typed_models():
    with running_devcluster("demo") as server:
        resource = client.ResourceV1Api(server.api_client())
        slices = resource.list_resource_slice().items  # typed models must accept what we serve
        claims = resource.list_resource_claim_for_all_namespaces().items
        pods = client.CoreV1Api(server.api_client()).list_pod_for_all_namespaces().items
        published = {(s.spec.driver, s.spec.pool.name, d.name) for s in slices for d in (s.spec.devices or [])}
        pod_uids = {p.metadata.uid for p in pods}
        states = set()
        for c in claims:
            alloc = c.status.allocation if c.status else None
            if alloc:
                assert "resource.kubernetes.io/delete-protection" in c.metadata.finalizers
                missing = [r.device for r in alloc.devices.results if (r.driver, r.pool, r.device) not in published]
                states.add("device-gone" if missing else "allocated")
                if not c.status.reserved_for:
                    states.add("orphaned")
            else:
                states.add("pending")
            for ref in (c.status.reserved_for or []) if c.status else []:
                if ref.uid not in pod_uids:
                    states.add("stale-reservation")
            if c.metadata.deletion_timestamp:
                states.add("deleting")
        assert states >= {"allocated", "pending", "orphaned", "stale-reservation", "deleting", "device-gone"}
        generated = [c for c in claims if c.metadata.owner_references]
        assert all(c.metadata.annotations["resource.kubernetes.io/pod-claim-name"] for c in generated)
        nodes = client.CoreV1Api(server.api_client()).list_node().items
        assert any(cond.status != "True" for n in nodes for cond in n.status.conditions if cond.type == "Ready")


def test_scenario_rejects_double_allocation(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("""
nodes: [{name: n1, gpu: h100, gpus: 2}]
claims:
  - {namespace: a, name: c1, requests: [{name: g, deviceClassName: x}], node: n1, devices: {g: [gpu-0]}}
  - {namespace: a, name: c2, requests: [{name: g, deviceClassName: x}], node: n1, devices: {g: [gpu-0]}}
""")
    with pytest.raises(ScenarioError, match="c2.*already allocated to claim a/c1"):
        scenario_objects(str(bad))


def test_fleet_is_consistent():
    fleet = generate_fleet(nodes=50, claims=200, seed=3)
    devices = {
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
        for s in fleet["resourceslices"]
        for d in s["spec"].get("devices", [])
    }
    allocated = [
        (r["driver"], r["pool"], r["device"])
        for c in fleet["resourceclaims"]
        for r in c["status"].get("allocation", {}).get("devices", {}).get("results", [])
    ]
    assert allocated and set(allocated) <= devices and len(set(allocated)) == len(allocated)
    assert any(s["spec"].get("sharedCounters") for s in fleet["resourceslices"])
    store = Store()
    store.bulk_load(fleet, copy=False)
    assert store.count("resourceclaims") == 200


def test_churn_keeps_allocations_consistent():
    store = Store()
    load_scenario(store, "demo")
    churn = Churn(store, seed=5, driver_outage_ticks=2)
    for _ in range(200):
        churn.step()
    assert churn.counts["allocated"] and churn.counts["released"] and churn.counts["driver_removed"]
    seen = set()
    for c in store.list("resourceclaims", namespace="churn-demo"):
        for r in c["status"].get("allocation", {}).get("devices", {}).get("results", []):
            key = (r["driver"], r["pool"], r["device"])
            assert key not in seen
            seen.add(key)


def test_churn_binds_only_where_the_scheduler_filters_allow_and_says_why_not():
    """Churn pods carry no tolerations: never on the NotReady gpu-h100-04 (unreachable NoSchedule and
    NoExecute), the cordoned gpu-l4-03 or a node tainted here; a pod left Pending carries the
    scheduler's reason and a message that counts all ten nodes; the backlog stays bounded."""
    store = Store()
    load_scenario(store, "demo")
    tainted = ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03", "gpu-a100-01", "gpu-a100-02"]
    for name in tainted:
        node = store.get("nodes", None, name)
        taints = node["spec"].get("taints", []) + [{"key": "example.com/maintenance", "effect": "NoSchedule"}]
        store.patch("nodes", None, name, {"spec": {"taints": taints}}, "application/merge-patch+json")
    forbidden = {*tainted, "gpu-h100-04", "gpu-l4-03"}
    churn = Churn(store, seed=11, driver_outage_ticks=3)
    messages = set()
    for _ in range(300):
        churn.step()
        pods = store.list("pods", namespace="churn-demo")
        assert not {p["spec"].get("nodeName") for p in pods} & forbidden
        pending = [p for p in pods if p["status"]["phase"] == "Pending"]
        assert len(pending) <= MAX_PENDING
        for p in pending:
            [scheduled] = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
            assert scheduled["status"] == "False" and scheduled["reason"] == "Unschedulable"
            messages.add(scheduled["message"])
    assert churn.counts["allocated"] and churn.counts["unschedulable"] and churn.counts["cancelled"]
    assert {p["spec"]["nodeName"] for p in store.list("pods", namespace="churn-demo") if p["spec"].get("nodeName")} <= {
        "gpu-l4-01",
        "gpu-l4-02",
    }
    # l4-01 and l4-02 full (or their driver away) and cpu-01 without devices: DynamicResources
    # rejects them; the cordon is checked before the cordon's taint.
    assert (
        "0/10 nodes are available: 1 node(s) were unschedulable, 3 cannot allocate all claims, "
        "6 node(s) had untolerated taint(s). preemption: 0/10 nodes are available: "
        "10 Preemption is not helpful for scheduling." in messages
    )


def test_scheduler_lets_a_tolerating_pod_onto_a_tainted_node_but_not_onto_a_not_ready_one():
    objects = scenario_objects("demo")
    nodes = {n["metadata"]["name"]: n for n in objects["nodes"]}
    nodes["gpu-h100-01"]["spec"]["taints"] = [{"key": "example.com/maintenance", "value": "x", "effect": "NoSchedule"}]
    pod = {
        "spec": {
            "tolerations": [{"key": "example.com/maintenance", "operator": "Exists"}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        },
        "status": {},
    }
    free = {name: [("gpu.nvidia.com", name, "gpu-7")] for name in nodes}
    fits, message = scheduler.feasible(list(nodes.values()), objects["pods"], pod, free)
    assert "gpu-h100-01" in fits and "gpu-h100-04" not in fits and "gpu-l4-03" not in fits and message is None
    greedy = {**pod, "spec": {**pod["spec"], "containers": [{"name": "c", "resources": {"requests": {"cpu": "500"}}}]}}
    fits, message = scheduler.feasible(list(nodes.values()), objects["pods"], greedy, free)
    assert not fits
    # NodeResourcesFit is the one rejection preemption could resolve; no lower-priority victims here.
    assert message == (
        "0/10 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, "
        "8 Insufficient cpu. preemption: 0/10 nodes are available: 2 Preemption is not helpful for "
        "scheduling, 8 No preemption victims found for incoming pod."
    )
