"""What HAMi assigned, on the devcluster "mixed" scenario (issue 14): the pods' allocation annotations
are read (which physical GPU, how much memory and compute per vGPU), a HAMi node's usage comes from
them, malformed ones are shown and the pod still counts; /api/v1/nodes/ and /api/v1/pods/ serve it;
the node and pod pages show it; nodes whose GPUs only a device plugin or HAMi serves get fleet-map rows.
Expected values are computed here from the scenario's objects."""

import json
import re
from collections import defaultdict

import jsonschema
import pytest
from django.urls import reverse

from claims.models import Pod
from devcluster.scenario import scenario_objects
from inventory import accelerators
from inventory import fleet as inventory_fleet
from inventory.models import Node
from mirror.models import Cluster
from tests.fleet_data import load_scenario, make_user
from tests.sync_fixtures import cluster, devcluster, fast_sync  # noqa: F401

pytestmark = pytest.mark.django_db

ALLOCATED = "hami.io/vgpu-devices-allocated"


def parse(value):
    """HAMi's "UUID,TYPE,MEM,CORES:" per vGPU, ";" per container, read the plain way; None if unreadable."""
    out = []
    try:
        for container, chunk in enumerate(value.split(";")):
            for record in filter(None, chunk.split(":")):
                uuid, typ, mem, cores = record.split(",")
                out.append((container, uuid, typ, int(mem), int(cores)))
    except ValueError:
        return None
    return out


def limits(pod):
    out = defaultdict(int)
    for c in pod["spec"]["containers"]:
        for name, v in (c["resources"].get("limits") or {}).items():
            out[name] += int(v)
    return out


def expected_hami(objects, node_name):
    """Per registered GPU what the node's running pods were assigned; the unreadable pods; the totals."""
    node = next(n for n in objects["nodes"] if n["metadata"]["name"] == node_name)
    register = json.loads(node["metadata"]["annotations"]["hami.io/node-nvidia-register"])
    devices = {
        d["id"]: {
            "slots": d["count"],
            "memory": d["devmem"],
            "cores": d["devcore"],
            "slots_used": 0,
            "memory_used": 0,
            "cores_used": 0,
            "pods": [],
        }
        for d in register
    }
    problems, by_requests = set(), defaultdict(int)
    for pod in objects["pods"]:
        if pod["spec"].get("nodeName") != node_name or pod["status"]["phase"] in ("Succeeded", "Failed"):
            continue
        who = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        value = (pod["metadata"].get("annotations") or {}).get(ALLOCATED)
        assigned = parse(value) if value else None
        if assigned is None:  # no assignment, or none that can be read: its requests count
            if value:
                problems.add(who)
            for name, v in limits(pod).items():
                by_requests[name] += v
            continue
        for container, uuid, _typ, mem, cores in assigned:
            d = devices[uuid]
            d["slots_used"] += 1
            d["memory_used"] += mem
            d["cores_used"] += cores
            d["pods"].append((who, container, mem, cores))
    totals = {
        "gpus": len(devices),
        "shares": sum(d["slots"] for d in devices.values()),
        "shares_used": sum(d["slots_used"] for d in devices.values()) + by_requests["nvidia.com/gpu"],
        "memory": sum(d["memory"] for d in devices.values()),
        "memory_used": sum(d["memory_used"] for d in devices.values()) + by_requests["nvidia.com/gpumem"],
        "cores": sum(d["cores"] for d in devices.values()),
        "cores_used": sum(d["cores_used"] for d in devices.values()) + by_requests["nvidia.com/gpucores"],
    }
    return devices, problems, totals


def got_devices(hami):
    return {
        d["id"]: {
            "slots": d["slots"],
            "memory": d["memory"],
            "cores": d["cores"],
            "slots_used": d["slots_used"],
            "memory_used": d["memory_used"],
            "cores_used": d["cores_used"],
            "pods": sorted((p["pod"], p["container"], p["memory"], p["cores"]) for p in d["pods"]),
        }
        for d in hami["devices"]
    }


def sorted_pods(devices):
    return {k: dict(v, pods=sorted(v["pods"])) for k, v in devices.items()}


@pytest.fixture
def mixed():
    return load_scenario(Cluster.objects.create(name="mixed"), "mixed"), scenario_objects("mixed")


def test_annotation_parsing():
    # init container first, an empty container kept as an empty entry, two vGPUs in the last one
    value = "GPU-a,NVIDIA,3000,30:;;GPU-b,NVIDIA,20000,0:GPU-c,NVIDIA,1000,5:;"
    devices, problem = accelerators.hami_pod_devices(value)
    assert problem == ""
    assert [(d["container"], d["uuid"], d["type"], d["memory"], d["cores"]) for d in devices] == parse(value)
    assert [d["container"] for d in devices] == [0, 2, 2]
    # unreadable records are left out and named; what can be read is kept; nothing raises
    devices, problem = accelerators.hami_pod_devices("GPU-a,NVIDIA,3000,30:GPU-x,NVIDIA,lots,1:GPU-y,3:;")
    assert [d["uuid"] for d in devices] == ["GPU-a"] and "GPU-x,NVIDIA,lots,1" in problem and "GPU-y,3" in problem
    assert accelerators.hami_pod_devices(";;") == ([], "")
    assert accelerators.hami_pod_devices(None)[1] and accelerators.hami_pod_devices(",,,-1:")[1]
    # a pod without HAMi's annotation (or with only empty containers) has no assignment
    assert accelerators.pod_assignment({"metadata": {"annotations": {ALLOCATED: ";"}}}) == {}
    assert accelerators.pod_assignment({"metadata": {}}) == {}


def test_hami_usage_is_what_hami_assigned(mixed):
    cluster, objects = mixed
    devices, problems, totals = expected_hami(objects, "hami-01")
    got = accelerators.node_sources([cluster.id])[(cluster.id, "hami-01")]["hami"]
    assert got_devices(got) == sorted_pods(devices)
    assert {p["pod"] for p in got["problems"]} == problems == {"ml/hami-job-bad"}
    assert {k: got[k] for k in totals} == totals
    # the assignment, not the requests: gpumem is per vGPU, gpumem-percentage only HAMi turns into MiB
    requested = sum(
        limits(p)["nvidia.com/gpumem"]
        for p in objects["pods"]
        if p["spec"].get("nodeName") == "hami-01" and p["status"]["phase"] == "Running"
    )
    assert got["memory_used"] != requested
    # fleet totals per source agree; the unreadable pod is still mirrored (never dropped)
    fleet = inventory_fleet.source_totals([cluster.id])["hami"]
    assert (fleet["shares_used"], fleet["memory_used"]) == (totals["shares_used"], totals["memory_used"])
    bad = Pod.objects.get(cluster=cluster, namespace="ml", name="hami-job-bad")
    assert bad.hami["problem"] and bad.hami["devices"] == []


def test_assignment_follows_pod_changes(mixed):
    from mirror.sync.apply import delete_object

    cluster, objects = mixed
    pod = next(p for p in objects["pods"] if p["metadata"]["name"] == "hami-job-0")
    [(_c, uuid, _t, mem, _cores)] = parse(pod["metadata"]["annotations"][ALLOCATED])
    before = got_devices(accelerators.node_sources([cluster.id])[(cluster.id, "hami-01")]["hami"])[uuid]
    delete_object(cluster, "Pod", dict(pod, metadata=dict(pod["metadata"], resourceVersion="999999")))
    after = got_devices(accelerators.node_sources([cluster.id])[(cluster.id, "hami-01")]["hami"])[uuid]
    assert (after["slots_used"], after["memory_used"]) == (before["slots_used"] - 1, before["memory_used"] - mem)
    assert not Pod.objects.filter(cluster=cluster, name="hami-job-0").exists()


def schema_validator(client):
    """A validator for the served OpenAPI components (OpenAPI 3.0 `nullable` read as JSON Schema)."""

    def plain(node):
        if isinstance(node, dict):
            node = {k: plain(v) for k, v in node.items()}
            if node.pop("nullable", False):
                return {"anyOf": [node, {"type": "null"}]}
            return node
        return [plain(v) for v in node] if isinstance(node, list) else node

    schemas = plain(client.get("/api/schema/?format=json").json()["components"]["schemas"])
    return lambda name, body: jsonschema.validate(
        body, {"$ref": f"#/components/schemas/{name}", "components": {"schemas": schemas}}
    )


@pytest.mark.sqlite_default  # the per-node JSON aggregate has a PostgreSQL and a SQLite form
def test_nodes_api_serves_device_plugin_and_hami_fields(mixed, client):
    cluster, objects = mixed
    client.force_login(make_user("api-admin", "admin"))
    body = client.get("/api/v1/nodes/?cluster=mixed&page_size=100").json()
    schema_validator(client)("PaginatedNodeList", body)
    by_name = {n["name"]: n for n in body["results"]}
    nodes = {n["metadata"]["name"]: n for n in objects["nodes"]}
    # device plugin: per resource, what the node advertises and its running pods request
    for name in ("dp-only-01", "dp-mig-01", "both-01"):
        alloc = {r: int(v) for r, v in nodes[name]["status"]["allocatable"].items() if r.startswith("nvidia.com/")}
        used = defaultdict(int)
        for p in objects["pods"]:
            if p["spec"].get("nodeName") == name and p["status"]["phase"] not in ("Succeeded", "Failed"):
                for r, v in limits(p).items():
                    used[r] += v
        got = by_name[name]["accelerators"]
        assert {(r["source"], r["resource"], r["allocatable"], r["requested"]) for r in got} == {
            ("device-plugin", r, a, used[r]) for r, a in alloc.items()
        }
        gpus = sum(a for r, a in alloc.items() if r == "nvidia.com/gpu")
        assert (by_name[name]["device_plugin"]["gpus"], by_name[name]["device_plugin"]["free"]) == (
            gpus,
            gpus - used["nvidia.com/gpu"],
        )
        assert by_name[name]["hami"] is None
    # HAMi: registered GPUs with what HAMi assigned to which pods, totals
    devices, problems, totals = expected_hami(objects, "hami-01")
    hami = by_name["hami-01"]["hami"]
    assert got_devices(hami) == sorted_pods(devices) and {k: hami[k] for k in totals} == totals
    assert {p["pod"] for p in hami["problems"]} == problems
    assert {r["resource"] for r in by_name["hami-01"]["accelerators"]} == {
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpucores",
    }
    assert by_name["hami-01"]["device_plugin"] is None
    # DRA-only nodes: nothing outside DRA, and the DRA counts stay DRA's
    assert (by_name["dra-only-01"]["accelerators"], by_name["dra-only-01"]["hami"], by_name["dra-only-01"]["gpus"]) == (
        [],
        None,
        8,
    )
    # the detail endpoint says the same
    node_id = Node.objects.get(cluster=cluster, name="hami-01").pk
    detail = client.get(f"/api/v1/nodes/{node_id}/").json()
    schema_validator(client)("Node", detail)
    assert {k: detail[k] for k in ("accelerators", "device_plugin", "hami")} == {
        k: by_name["hami-01"][k] for k in ("accelerators", "device_plugin", "hami")
    }


def test_nodes_api_hides_pods_of_other_namespaces(mixed, client):
    _cluster, objects = mixed
    client.force_login(make_user("api-scoped", "viewer", namespaces=["other"]))
    for url in ("/api/v1/nodes/?cluster=mixed&name=hami-01", f"/api/v1/nodes/{Node.objects.get(name='hami-01').pk}/"):
        body = client.get(url).json()
        [hami] = [n["hami"] for n in body["results"]] if "results" in body else [body["hami"]]
        shares = [p for d in hami["devices"] for p in d["pods"]]
        assert shares and hami["problems"]
        # The whole entry, not just its name: nothing of the pod but the share it holds.
        assert all(p == {"pod": "", "container": None, "memory": p["memory"], "cores": p["cores"]} for p in shares), (
            shares
        )
        assert all(p == {"pod": "", "text": p["text"]} for p in hami["problems"])
        assert sum(p["memory"] for p in shares) == sum(d["memory_used"] for d in hami["devices"])
        for pod in objects["pods"]:  # no name, namespace or uid of the scenario's pods anywhere in the answer
            meta = pod["metadata"]
            for secret in (meta["name"], meta.get("uid") or meta["name"], f'"{meta["namespace"]}"'):
                assert secret not in json.dumps(hami), secret
    # Where the user sees the namespace, the pods are named (and only the documented fields are served).
    client.force_login(make_user("api-ml", "viewer", namespaces=["ml"]))
    [hami] = [n["hami"] for n in client.get("/api/v1/nodes/?cluster=mixed&name=hami-01").json()["results"]]
    shares = [p for d in hami["devices"] for p in d["pods"]]
    assert {p["pod"] for p in shares} >= {"ml/hami-job-0"} and all(
        set(p) == {"pod", "container", "memory", "cores"} for p in shares
    )


def test_pods_api_serves_the_assignment(mixed, client):
    _cluster, objects = mixed
    client.force_login(make_user("api-admin", "admin"))
    body = client.get("/api/v1/pods/?cluster=mixed&namespace=ml&page_size=100").json()
    schema_validator(client)("PaginatedPodList", body)
    by_name = {p["name"]: p for p in body["results"]}
    for pod in objects["pods"]:
        value = (pod["metadata"].get("annotations") or {}).get(ALLOCATED)
        name = pod["metadata"]["name"]
        if not value:
            assert name not in by_name or by_name[name]["hami"] is None
            continue
        got = by_name[name]["hami"]  # every pod HAMi scheduled is mirrored, readable or not
        assert got["annotation"] == ALLOCATED
        if parse(value) is None:
            assert got["problem"] and got["devices"] == []
        else:
            assert [(d["container"], d["uuid"], d["type"], d["memory"], d["cores"]) for d in got["devices"]] == parse(
                value
            ) and got["problem"] == ""


def test_node_and_pod_pages_show_the_assignment(mixed, client):
    cluster, objects = mixed
    client.force_login(make_user("page-viewer", "viewer"))
    page = plain_numbers(client.get(reverse("inventory:node-detail", args=["mixed", "hami-01"])).content.decode())
    devices, _problems, _totals = expected_hami(objects, "hami-01")
    table = page[page.index('id="hami-devices"') :]
    for uuid, d in devices.items():
        row = table[table.index(f'data-uuid="{uuid}"') :]
        row = row[: row.index("</tr>")]
        assert f"{d['slots_used']} / {d['slots']}" in row and f"{d['memory_used']} / {d['memory']}" in row
        for who, _c, mem, cores in d["pods"]:
            assert who in row and f"{mem} MiB, {cores}%" in row
    warning = page[page.index('id="hami-problems"') :]
    assert "ml/hami-job-bad" in warning[: warning.index("</div>")]

    pod = next(p for p in objects["pods"] if p["metadata"]["name"] == "hami-job-1")
    page = plain_numbers(client.get(reverse("claims:pod-detail", args=["mixed", "ml", "hami-job-1"])).content.decode())
    table = page[page.index('id="pod-hami"') : page.index("</table>", page.index('id="pod-hami"'))]
    for _container, uuid, _t, mem, cores in parse(pod["metadata"]["annotations"][ALLOCATED]):
        assert uuid in table and re.search(rf'<td class="num">{mem}</td>\s*<td class="num">{cores}</td>', table)
    page = client.get(reverse("claims:pod-detail", args=["mixed", "ml", "hami-job-bad"])).content.decode()
    assert 'id="hami-problem"' in page and "lots" in page

    # a namespace-scoped viewer sees that a pod holds the share, not which: on the page and in the live
    # region's fragment the websocket makes the page fetch
    client.force_login(make_user("page-scoped", "viewer", namespaces=["other"]))
    url = reverse("inventory:node-detail", args=["mixed", "hami-01"])
    for page in (client.get(url).content.decode(), client.get(url + "?fragment=devices").content.decode()):
        hami = page[page.index('id="hami"') :]
        assert "hami-job" not in hami and "/ml/" not in hami and "a pod in another namespace" in hami
        assert "#0:" not in hami  # nor the container


def plain_numbers(page):
    """The page with thousands separators taken out (numbers may be localised)."""
    return re.sub(r"(?<=\d)[,.\u00a0\u202f ](?=\d{3}\b)", "", page)


def map_rows(html, section_start):
    """{node: [(source, cell classes, data-uuid)]} of the fleet-map rows after `section_start`."""
    html = html[html.index(section_start) :] if section_start else html
    rows = {}
    for m in re.finditer(
        r'<div class="maprow[^"]*"[^>]*>.*?<a class="mapnode"[^>]*>(?:<span class="muted">[^<]*</span>)?([^<]+)</a>(.*?)</div>',
        html,
        re.S,
    ):
        cells = []
        for group in re.finditer(
            r'<span class="srccells" data-source="([^"]+)">(.*?)</span>(?=<span class="srccells"|</span>)',
            m.group(2),
            re.S,
        ):
            for cell in re.finditer(r'<span class="(cell [^"]*)"(?: data-uuid="([^"]*)")?', group.group(2)):
                cells.append((group.group(1), cell.group(1), cell.group(2)))
        rows[m.group(1)] = cells
    return rows


def test_fleet_map_rows_for_gpus_outside_dra(mixed, client):
    _cluster, objects = mixed
    client.force_login(make_user("map-viewer", "viewer"))
    page = client.get(reverse("inventory:fleet-map") + "?cluster=mixed").content.decode()
    dra_nodes = {s["spec"]["nodeName"] for s in objects["resourceslices"] if s["spec"].get("devices")}
    offering = {
        n["metadata"]["name"]
        for n in objects["nodes"]
        if any(r.startswith("nvidia.com/") and int(v) for r, v in n["status"]["allocatable"].items())
    }
    rows = map_rows(page, 'id="map-outside-dra"')
    assert set(rows) == offering - dra_nodes == {"dp-only-01", "dp-mig-01", "hami-01"}
    for name in ("dp-only-01", "dp-mig-01"):
        node = next(n for n in objects["nodes"] if n["metadata"]["name"] == name)
        offered = sum(int(v) for r, v in node["status"]["allocatable"].items() if r.startswith("nvidia.com/"))
        used = sum(
            v
            for p in objects["pods"]
            if p["spec"].get("nodeName") == name and p["status"]["phase"] == "Running"
            for v in limits(p).values()
        )
        assert [c[0] for c in rows[name]] == ["device-plugin"] * offered
        assert sum("s-allocated" in c[1] for c in rows[name]) == used
        assert all(" part" in c[1] for c in rows[name]) == (name == "dp-mig-01")  # partitions, never whole GPUs
    devices, _problems, _totals = expected_hami(objects, "hami-01")
    assert {c[2] for c in rows["hami-01"]} == set(devices) and {c[0] for c in rows["hami-01"]} == {"hami"}
    for _source, classes, uuid in rows["hami-01"]:
        d = devices[uuid]
        assert ("s-free" in classes) == (d["slots_used"] == 0)
    # a DRA node that a device plugin also serves keeps its DRA row, with the device-plugin cells labelled beside
    both = map_rows(page[: page.index('id="map-outside-dra"')], "")["both-01"]
    assert [c[0] for c in both] == ["device-plugin"] * 4
    # DRA totals are DRA's alone
    gpus = len(
        {
            (s["spec"]["nodeName"], d["attributes"]["uuid"]["string"])
            for s in objects["resourceslices"]
            for d in s["spec"].get("devices", [])
            if d["attributes"]["type"]["string"] == "gpu"
        }
    )
    assert f'id="map-kinds" data-gpus="{gpus}"' in page
    # the section follows the name filter and stays out of the DRA state filters
    assert set(
        map_rows(
            client.get(reverse("inventory:fleet-map") + "?cluster=mixed&q=hami").content.decode(),
            'id="map-outside-dra"',
        )
    ) == {"hami-01"}
    assert (
        'id="map-outside-dra"'
        not in client.get(reverse("inventory:fleet-map") + "?cluster=mixed&state=free").content.decode()
    )


def test_watchers_mirror_what_the_api_server_publishes(cluster, devcluster, fast_sync):
    """Through the real path: the built-in API server serves the scenario's Nodes and Pods with HAMi's
    annotations, `manage.py watch --once` mirrors them, the node's HAMi use is what HAMi assigned."""
    from django.core.management import call_command

    objects = scenario_objects("mixed")
    for plural in ("namespaces", "nodes", "pods"):
        for obj in objects[plural]:
            devcluster.store.create(plural, json.loads(json.dumps(obj)))
    call_command("watch", "--cluster", "dev", "--once")
    devices, problems, totals = expected_hami(objects, "hami-01")
    got = accelerators.node_sources([cluster.id])[(cluster.id, "hami-01")]["hami"]
    assert got_devices(got) == sorted_pods(devices) and {k: got[k] for k in totals} == totals
    assert {p["pod"] for p in got["problems"]} == problems
    hami_pods = {
        p["metadata"]["name"] for p in objects["pods"] if ALLOCATED in (p["metadata"].get("annotations") or {})
    }
    assert hami_pods <= set(Pod.objects.filter(cluster=cluster).values_list("name", flat=True))
