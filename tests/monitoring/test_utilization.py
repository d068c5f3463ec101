"""GPU utilization through a real Prometheus: it scrapes an exporter endpoint served here in
dcgm-exporter's text format (whole GPUs and MIG instances, both host-label spellings, DRA labels,
per-container duplicates), gpudash polls it, joins every series to its device and stores it."""

import http.server
import threading

import pytest
from django.utils import timezone

from mirror.models import Cluster, OpsCounter
from monitoring import utilization
from monitoring.models import PrometheusSource, UtilizationSample
from tests.browser import free_port
from tests.fleet_data import apply_all, meta
from tests.prometheus_server import Prometheus, needs_prometheus

pytestmark = [pytest.mark.django_db(transaction=True), needs_prometheus]

DRIVER = "gpu.nvidia.com"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
UUIDS = {
    "n1-gpu-0": "GPU-5e1f0c3a-8b2d-4f61-9a7e-0c1d2e3f4a5b",
    "n1-gpu-1": "GPU-9a8b7c6d-1111-2222-3333-444455556666",
    "n2-gpu-0": "GPU-0f0e0d0c-aaaa-bbbb-cccc-ddddeeeeffff",
}


def gpu(name, uuid, product=H100):
    return {
        "name": name,
        "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid}, "productName": {"string": product}},
        "capacity": {"memory": {"value": "80Gi"}},
    }


def mig(name, parent, profile):
    return {
        "name": name,
        "attributes": {
            "type": {"string": "mig"},
            "parentUUID": {"string": parent},
            "profile": {"string": profile},
            "productName": {"string": A100},
        },
        "capacity": {"memory": {"value": "10Gi"}},
    }


def node(name):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta(name),
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-05T10:00:00Z"}]},
    }


def slice_(node_name, devices):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": meta(f"{node_name}-slice"),
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(namespace, name, node_name, device):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta(name, namespace),
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node_name, "device": device}]}
            },
            "reservedFor": [{"resource": "pods", "name": f"{name}-pod", "uid": f"uid-{namespace}-{name}-pod"}],
        },
    }


def pod(namespace, name, claim_name, node_name):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta(name, namespace),
        "spec": {
            "nodeName": node_name,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [{"name": "main", "image": "cuda"}],
        },
        "status": {"phase": "Running"},
    }


N2 = UUIDS["n2-gpu-0"]
FLEET = [
    ("Node", node("node-1")),
    ("Node", node("node-2")),
    ("ResourceSlice", slice_("node-1", [gpu("gpu-0", UUIDS["n1-gpu-0"]), gpu("gpu-1", UUIDS["n1-gpu-1"])])),
    (
        "ResourceSlice",
        slice_(
            "node-2",
            [
                gpu("gpu-0", N2, A100),
                mig("gpu-0-mig-3g40gb-9-4", N2, "3g.40gb"),
                mig("gpu-0-mig-1g10gb-19-0", N2, "1g.10gb"),
                mig("gpu-0-mig-1g10gb-19-1", N2, "1g.10gb"),
            ],
        ),
    ),
    ("ResourceClaim", claim("team-a", "train", "node-1", "gpu-0")),
    ("ResourceClaim", claim("team-b", "infer", "node-2", "gpu-0-mig-3g40gb-9-4")),
    ("Pod", pod("team-a", "train-pod", "train", "node-1")),
    ("Pod", pod("team-b", "infer-pod", "infer", "node-2")),
]


def exposition(train_util=87, infer_util=3):
    """dcgm-exporter's /metrics for the fleet (layout of its template; values made up)."""
    n1 = 'gpu="{i}",UUID="{u}",pci_bus_id="00000000:{b}:00.0",device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",DCGM_FI_DRIVER_VERSION="570.124.06"'
    g0 = n1.format(i=0, u=UUIDS["n1-gpu-0"], b="18")
    g1 = n1.format(i=1, u=UUIDS["n1-gpu-1"], b="2A")
    # node-2 runs a newer exporter: `hostname`, and MIG instances with the parent's UUID.
    m = f'gpu="0",UUID="{N2}",pci_bus_id="00000000:3B:00.0",device="nvidia0",modelName="{A100}",GPU_I_PROFILE="{{p}}",GPU_I_ID="{{i}}",hostname="node-2",DCGM_FI_DRIVER_VERSION="570.124.06"'
    m3, m1a, m1b = m.format(p="3g.40gb", i=2), m.format(p="1g.10gb", i=9), m.format(p="1g.10gb", i=10)
    # One 1g.10gb instance carries the exporter's DRA labels (KUBERNETES_ENABLE_DRA): it can be told apart.
    m1a += f',dra_claim_name="x",dra_claim_namespace="team-c",dra_device_name="gpu-0-mig-1g10gb-19-0",dra_driver_name="{DRIVER}",dra_pool_name="node-2"'
    stranger = 'gpu="0",UUID="GPU-00000000-dead-beef-0000-000000000000",device="nvidia0",modelName="Tesla T4",Hostname="elsewhere"'
    return f"""# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{g0},container="trainer",namespace="team-a",pod="train-pod"}} {train_util}
DCGM_FI_DEV_GPU_UTIL{{{g0},container="sidecar",namespace="team-a",pod="train-pod"}} {train_util}
DCGM_FI_DEV_GPU_UTIL{{{g1}}} 0
DCGM_FI_DEV_GPU_UTIL{{{m3}}} {infer_util}
DCGM_FI_DEV_GPU_UTIL{{{m1a}}} 50
DCGM_FI_DEV_GPU_UTIL{{{m1b}}} 60
DCGM_FI_DEV_GPU_UTIL{{{stranger}}} 99
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{{g0},container="trainer",namespace="team-a",pod="train-pod"}} 40960
DCGM_FI_DEV_FB_USED{{{g1}}} 0
DCGM_FI_DEV_FB_USED{{{m3}}} 1024
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{g0}}} 312.456000
DCGM_FI_DEV_POWER_USAGE{{{g1}}} 61.000000
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{m3}}} 0.412345
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{{{g0},err_code="0",err_msg="No Error"}} 0
"""


class FakeEndpoints(http.server.ThreadingHTTPServer):
    """The exporter's /metrics (what Prometheus scrapes), and a broken "Prometheus" at /broken/."""

    def __init__(self):
        self.body = exposition()
        self.broken_answer = b"<html>502 Bad Gateway</html>"
        super().__init__(("127.0.0.1", free_port()), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/metrics":
            self._send(200, self.server.body.encode(), "text/plain; version=0.0.4")
        else:
            self._send(404, b"not found", "text/plain")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(200, self.server.broken_answer, "text/html")

    def _send(self, status, body, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """One exporter endpoint and one Prometheus scraping it for the module (starting one takes seconds)."""
    exporter = FakeEndpoints()
    prom = Prometheus(
        tmp_path_factory.mktemp("prom"),
        [{"job_name": "dcgm-exporter", "static_configs": [{"targets": [exporter.url.removeprefix("http://")]}]}],
    ).start()
    try:
        yield exporter, prom
    finally:
        prom.stop()
        exporter.shutdown()
        exporter.server_close()


@pytest.fixture
def setup(scraped):
    exporter, prom = scraped
    exporter.body = exposition()
    cluster = Cluster.objects.create(name="gpus")
    apply_all(cluster, FLEET)
    source = PrometheusSource.objects.create(cluster=cluster, url=prom.url)
    return cluster, source, exporter, prom


def wait_scraped(prom, train_util):
    prom.wait_for(f'DCGM_FI_DEV_GPU_UTIL{{UUID="{UUIDS["n1-gpu-0"]}", container="trainer"}} == {train_util}')
    prom.wait_for("DCGM_FI_PROF_GR_ENGINE_ACTIVE")


def samples(cluster):
    return {(s.pool, s.device): s for s in UtilizationSample.objects.filter(cluster=cluster)}


@pytest.mark.sqlite_default  # the ORM upsert path (PostgreSQL uses COPY)
def test_poll_joins_each_series_to_its_device(setup):
    cluster, source, exporter, prom = setup
    wait_scraped(prom, 87)
    # One fixed minute for both polls below: the wall clock may cross a minute between them.
    now = timezone.now().replace(second=30, microsecond=0)
    result = utilization.poll(source, now=now)
    assert not result.error, result.error
    got = {
        k: (
            s.gpu_util,
            s.fb_used_bytes,
            s.power_watts,
            s.gr_engine_active,
            s.allocated,
            s.held_by_namespace,
            s.held_by_name,
        )
        for k, s in samples(cluster).items()
    }
    assert got == {
        ("node-1", "gpu-0"): (87.0, 40960 * 2**20, 312.456, None, True, "team-a", "train"),
        ("node-1", "gpu-1"): (0.0, 0.0, 61.0, None, False, "", ""),
        ("node-2", "gpu-0-mig-3g40gb-9-4"): (3.0, 1024 * 2**20, None, 0.412345, True, "team-b", "infer"),
        ("node-2", "gpu-0-mig-1g10gb-19-0"): (50.0, None, None, None, False, "", ""),  # told apart by its DRA labels
    }
    # The other 1g.10gb instance has no DRA labels and a twin profile: reported, not guessed.
    assert result.unmatched == {"unknown GPU UUID": 1, "several partitions of that GPU have this profile": 1}
    source.refresh_from_db()
    assert (source.devices_matched, source.series_unmatched, source.last_error) == (4, 2, "")
    latest = utilization.latest([cluster.id])
    assert latest[(cluster.id, DRIVER, "node-1", "gpu-0")].gpu_util == 87.0 and len(latest) == 4

    # A second poll in the same minute overwrites that minute; the next minute adds history.
    exporter.body = exposition(train_util=12)
    wait_scraped(prom, 12)
    utilization.poll(source, now=now)
    assert samples(cluster)[("node-1", "gpu-0")].gpu_util == 12.0
    utilization.poll(source, now=now + timezone.timedelta(minutes=1))
    assert UtilizationSample.objects.filter(cluster=cluster, pool="node-1", device="gpu-0").count() == 2
    assert utilization.latest([cluster.id])[(cluster.id, DRIVER, "node-1", "gpu-0")].minute == (
        now + timezone.timedelta(minutes=1)
    ).replace(second=0)


def test_history_is_pruned_after_retention(setup, settings):
    cluster, source, exporter, prom = setup
    settings.GPUDASH_MONITORING = {**settings.GPUDASH_MONITORING, "HISTORY_HOURS": 1}
    wait_scraped(prom, 87)
    start = timezone.now().replace(second=0, microsecond=0) - timezone.timedelta(hours=2)
    for minutes in (0, 30, 61, 120):
        utilization.poll(source, now=start + timezone.timedelta(minutes=minutes))
    # The hourly prune task (off the poll's path) deletes what is older than the retention.
    from monitoring.tasks import prune_history

    prune_history.apply(kwargs={}).get()  # the Celery task's own code, run in this process
    kept = sorted({s.minute for s in UtilizationSample.objects.filter(cluster=cluster)})
    assert kept == [start + timezone.timedelta(minutes=61), start + timezone.timedelta(minutes=120)]


def test_prometheus_down_or_garbage_is_an_error_and_keeps_the_history(setup):
    cluster, source, exporter, prom = setup
    wait_scraped(prom, 87)
    assert not utilization.poll(source).error
    before = sorted(
        UtilizationSample.objects.filter(cluster=cluster).values_list("pool", "device", "minute", "gpu_util")
    )

    source.refresh_from_db()
    source.url = f"http://127.0.0.1:{free_port()}"  # nothing listens there: Prometheus is down
    source.save(update_fields=["url"])
    later = timezone.now() + timezone.timedelta(minutes=1)
    result = utilization.poll(source, now=later)
    assert "Connection refused" in result.error or "NewConnectionError" in result.error, result.error
    source.refresh_from_db()
    assert source.last_error == result.error and source.last_error_at == later and source.last_success_at < later

    source.url = exporter.url + "/broken"
    source.save(update_fields=["url"])
    result = utilization.poll(source, now=later)
    assert "not JSON" in result.error and "502 Bad Gateway" in result.error
    exporter.broken_answer = b'{"status": "success", "data": {"resultType": "matrix", "result": []}}'
    assert "expected an instant vector" in utilization.poll(source, now=later).error
    exporter.broken_answer = (
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "lots"]}]}}'
    )
    assert "is not a sample" in utilization.poll(source, now=later).error
    exporter.broken_answer = b'{"status": "error", "errorType": "bad_data", "error": "parse error at char 4"}'
    assert "bad_data: parse error at char 4" in utilization.poll(source, now=later).error

    # Nothing was lost or half-written, and the current values stay those of the last good poll.
    assert (
        sorted(UtilizationSample.objects.filter(cluster=cluster).values_list("pool", "device", "minute", "gpu_util"))
        == before
    )
    assert len(utilization.latest([cluster.id])) == 4
    assert dict(OpsCounter.objects.filter(name="utilization_polls").values_list("label", "value")) == {
        "ok": 1,
        "error": 5,
    }


def test_idle_gpu_finding_opens_and_clears(setup, settings):
    from claims.models import Finding
    from claims.stuck import detect
    from inventory import devicestate, fleet
    from inventory.models import Device
    from monitoring.idle import idle_gpu_hours_by_namespace

    cluster, source, exporter, prom = setup
    settings.GPUDASH_MONITORING = {
        **settings.GPUDASH_MONITORING,
        "IDLE_THRESHOLD_PERCENT": 5,
        "IDLE_PERIOD_SECONDS": 300,
    }
    exporter.body = exposition(train_util=2, infer_util=50)  # train's GPU idles, infer's partition works
    wait_scraped(prom, 2)
    base = timezone.now().replace(second=0, microsecond=0) - timezone.timedelta(minutes=20)

    def at(minutes):
        return base + timezone.timedelta(minutes=minutes)

    def idle_findings():
        return list(Finding.objects.filter(cluster=cluster, rule="idle_gpu"))

    for minute in range(4):
        assert not utilization.poll(source, now=at(minute)).error
    detect(cluster, now=at(3))
    assert not idle_findings()  # under the threshold, but not for the whole period yet
    for minute in range(4, 7):
        utilization.poll(source, now=at(minute))
    detect(cluster, now=at(6))
    [finding] = idle_findings()
    assert (finding.namespace, finding.claim_name, finding.subject, finding.severity, finding.remedy) == (
        "team-a",
        "train",
        f"{DRIVER}/node-1/gpu-0",
        "info",
        "",
    )  # report-only: no release action
    assert finding.evidence["pods"] == ["team-a/train-pod"] and finding.evidence["max_utilization_percent"] == 2.0
    assert (
        "under 5% utilization" in finding.summary and "team-a/train" in finding.summary and finding.cleared_at is None
    )
    # Idle is not stuck: the device keeps its state, the claim is not in the stuck list.
    train_gpu = Device.objects.filter(cluster=cluster, pool="node-1", name="gpu-0")
    assert fleet.states_for(train_gpu)[0].st.state == fleet.ALLOCATED, list(
        Finding.objects.active().values_list("rule", "claim_name", "summary")
    )
    assert not devicestate.stuck_claim_ids().exists()
    assert idle_gpu_hours_by_namespace([cluster.id], now=at(7)) == [("team-a", round(7 / 60, 2))]
    from django.test import Client

    from tests.ui_fixtures import make_user

    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get("/claims/gpus/team-a/train/").content.decode()
    assert "Idle GPU" in page and "under 5% utilization" in page and "s-stuck" not in page  # shown, but not as stuck

    exporter.body = exposition(train_util=80, infer_util=50)
    wait_scraped(prom, 80)
    utilization.poll(source, now=at(7))
    detect(cluster, now=at(7))
    [finding] = idle_findings()
    assert finding.cleared_at == at(7)  # busy again: cleared


def test_pages_and_api_show_utilization_and_poll_errors(setup, client):
    from rest_framework.test import APIClient

    from tests.ui_fixtures import make_user

    cluster, source, exporter, prom = setup
    wait_scraped(prom, 87)
    utilization.poll(source)
    client.force_login(make_user("viewer"))
    device = client.get("/devices/gpus/gpu.nvidia.com/node-1/gpu-0/").content.decode()
    assert "data-gpu-util>87%" in device and "312.5 W" in device and "40.0\xa0GB" in device
    node = client.get("/nodes/gpus/node-2/").content.decode()
    assert "data-gpu-util>3%" in node and "data-gpu-util>50%" in node  # the 3g.40gb and the DRA-labelled 1g.10gb
    claim = client.get("/claims/gpus/team-a/train/").content.decode()
    assert "Utilization of the allocated devices" in claim and "data-gpu-util>87%" in claim
    # The pods list: each pod with the utilization of the devices its claims hold; the pod's own page too.
    pods = client.get("/pods/").content.decode()
    assert 'data-gpu-util title="gpu-0">87%' in pods and 'data-gpu-util title="gpu-0-mig-3g40gb-9-4">3%' in pods
    pod_page = client.get("/pods/gpus/team-b/infer-pod/").content.decode()
    assert "Utilization of the pod's devices" in pod_page and "data-gpu-util>3%" in pod_page
    # The map coloured by utilization: gpu-0 busy (>= 75 %), gpu-1 idle (< 5 %), the 1g.10gb twin without data.
    fleet_map = client.get("/fleet/map/?colour=utilization").content.decode()
    assert 'class="cell s-allocated u-4" href="/devices/gpus/gpu.nvidia.com/node-1/gpu-0/"' in fleet_map
    assert 'class="cell s-free u-0" href="/devices/gpus/gpu.nvidia.com/node-1/gpu-1/"' in fleet_map
    assert 'u-none" href="/devices/gpus/gpu.nvidia.com/node-2/gpu-0-mig-1g10gb-19-1/"' in fleet_map
    assert (
        " u-" not in client.get("/fleet/map/").content.decode().split('class="fleetmap')[1]
    )  # state colouring by default

    api = APIClient()
    api.force_authenticate(make_user("scoped", namespaces=["team-b"]))
    body = api.get("/api/v1/utilization", {"cluster": "gpus"}).json()
    rows = {(r["pool"], r["device"]): r for r in body["results"]}
    assert body["count"] == 4 and rows[("node-1", "gpu-0")]["gpu_utilization_percent"] == 87.0
    assert rows[("node-1", "gpu-0")]["held_by"] == {"hidden": True}  # team-a's claim, outside the scope
    assert rows[("node-2", "gpu-0-mig-3g40gb-9-4")]["held_by"] == {"namespace": "team-b", "name": "infer"}
    assert body["sources"][0]["error"] == "" and body["sources"][0]["devices_matched"] == 4
    assert api.get("/api/v1/utilization", {"colour": "x"}).status_code == 400
    assert api.get("/api/v1/utilization", {"limit": "0"}).status_code == 400

    # Prometheus down: the pages say so, and keep showing the last values with their time.
    source.refresh_from_db()
    source.url = f"http://127.0.0.1:{free_port()}"
    source.save(update_fields=["url"])
    utilization.poll(source)
    device = client.get("/devices/gpus/gpu.nvidia.com/node-1/gpu-0/").content.decode()
    assert "Utilization poll failed" in device and "Connection refused" in device and "data-gpu-util>87%" in device
    overview = client.get("/").content.decode()
    assert "Utilization poll failed" in overview and "Idle GPU-hours by namespace" in overview
    assert "Connection refused" in api.get("/api/v1/utilization").json()["sources"][0]["error"]
