"""The DRA control-plane panel through a real Prometheus: it scrapes fixture endpoints that serve the
kubelet's, the scheduler's and the controller manager's DRA metrics in their v1.36 names, labels and
buckets (two kubelets, with the node label a Prometheus-operator scrape sets), and gpudash's figures
are checked against the same PromQL evaluated by Prometheus and against the quantiles worked out by
hand from the fixture's buckets. Metrics Prometheus holds no series of are said to be absent."""

import http.server
import math
import threading
import time

import pytest
from django.test import Client
from rest_framework.test import APIClient

from mirror.models import Cluster
from monitoring import drametrics
from monitoring.models import PrometheusSource
from tests.browser import free_port
from tests.prometheus_server import Prometheus, needs_prometheus
from tests.site.test_i18n_sweep import KUBERNETES_TERMS, english_words
from tests.ui_fixtures import make_user

pytestmark = [pytest.mark.django_db(transaction=True), needs_prometheus]


@pytest.fixture(autouse=True)
def fresh_evaluations():
    """Each test's figures from its own Prometheus run (a kept evaluation of an earlier test's source
    with the same id and URL would answer otherwise)."""
    drametrics.forget_cached()
    yield
    drametrics.forget_cached()


GPU, NIC = "gpu.nvidia.com", "rdma.example.com"
PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
UNPREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"


def exponential_range(low, high, count):
    """component-base's ExponentialBucketsRange (the kubelet's DRADurationBuckets: 0.1 s to 40 s, 15)."""
    factor = (high / low) ** (1.0 / (count - 1))
    return [low * factor**i for i in range(count)]


def exponential(start, factor, count):
    return [start * factor**i for i in range(count)]


DRA_BUCKETS = exponential_range(0.1, 40, 15)
PLUGIN_BUCKETS = exponential(0.00001, 1.5, 20)  # scheduler_plugin_execution_duration_seconds
WAIT_BUCKETS = exponential(0.1, 2, 14)  # scheduler_dra_bindingconditions_wait_duration_seconds


def histogram(name, help_text, buckets, series, n):
    """Text exposition of a histogram whose every series grows by the same observations each scrape:
    `series` is [(labels, {bucket index (len(buckets) = +Inf): observations per scrape})], n the scrape."""
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for labels, per_scrape in series:
        lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
        cumulative = 0
        for i, upper in enumerate([*buckets, math.inf]):
            cumulative += per_scrape.get(i, 0) * n
            le = "+Inf" if upper == math.inf else repr(upper)
            out.append(f'{name}_bucket{{{lab},le="{le}"}} {cumulative}')
        total = sum(per_scrape.values()) * n
        mid = sum(c * (buckets[min(i, len(buckets) - 1)]) for i, c in per_scrape.items()) * n
        out.append(f"{name}_sum{{{lab}}} {mid}")
        out.append(f"{name}_count{{{lab}}} {total}")
    return out


# Per node: what a kubelet observes per scrape (bucket index -> observations).
KUBELET_GRPC = {
    "node-1": [
        ({"driver_name": GPU, "method_name": PREPARE, "grpc_status_code": "OK"}, {0: 2, 1: 1, 3: 1}),
        ({"driver_name": GPU, "method_name": UNPREPARE, "grpc_status_code": "OK"}, {0: 4}),
    ],
    "node-2": [
        ({"driver_name": GPU, "method_name": PREPARE, "grpc_status_code": "OK"}, {2: 1, 5: 2, 9: 1}),
        ({"driver_name": GPU, "method_name": PREPARE, "grpc_status_code": "DeadlineExceeded"}, {15: 1}),
        ({"driver_name": NIC, "method_name": PREPARE, "grpc_status_code": "OK"}, {0: 1}),
    ],
}
KUBELET_OPS = {
    "node-1": [({"operation_name": "PrepareResources", "is_error": "false"}, {1: 3, 4: 1})],
    "node-2": [
        ({"operation_name": "PrepareResources", "is_error": "false"}, {3: 2, 6: 2}),
        ({"operation_name": "PrepareResources", "is_error": "true"}, {15: 1}),
    ],
}
CLAIMS_IN_USE = {"node-1": {"<any>": 3, GPU: 3}, "node-2": {"<any>": 2, GPU: 1, NIC: 1}}
PLUGIN = [
    ({"plugin": "DynamicResources", "extension_point": "PreFilter", "status": "Success"}, {6: 3, 9: 1}),
    ({"plugin": "DynamicResources", "extension_point": "Filter", "status": "Success"}, {2: 10, 4: 6, 8: 4}),
    ({"plugin": "DynamicResources", "extension_point": "Filter", "status": "Unschedulable"}, {3: 2}),
    ({"plugin": "DynamicResources", "extension_point": "Reserve", "status": "Success"}, {5: 1}),
    ({"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Success"}, {1: 50}),  # not DRA
]
WAITS = [
    ({"profile": "default-scheduler", "driver": GPU, "status": "success"}, {3: 2, 5: 1}),
    ({"profile": "default-scheduler", "driver": GPU, "status": "timeout"}, {14: 1}),
]


def kubelet(node, n):
    lines = histogram(
        "dra_grpc_operations_duration_seconds",
        "[ALPHA] Duration in seconds of the DRA gRPC operations",
        DRA_BUCKETS,
        KUBELET_GRPC[node],
        n,
    )
    lines += histogram(
        "dra_operations_duration_seconds",
        "[ALPHA] Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod.",
        DRA_BUCKETS,
        KUBELET_OPS[node],
        n,
    )
    lines += [
        "# HELP dra_resource_claims_in_use [ALPHA] The number of ResourceClaims that are currently in use on the node.",
        "# TYPE dra_resource_claims_in_use gauge",
        *(f'dra_resource_claims_in_use{{driver_name="{d}"}} {v}' for d, v in CLAIMS_IN_USE[node].items()),
    ]
    return lines


def scheduler(n, binding):
    lines = histogram(
        "scheduler_plugin_execution_duration_seconds",
        "[ALPHA] Duration for running a plugin at a specific extension point.",
        PLUGIN_BUCKETS,
        PLUGIN,
        n,
    )
    if binding:  # registered only with the DRADeviceBindingConditions gate
        lines += [
            "# HELP scheduler_dra_bindingconditions_allocations_total [ALPHA] Number of allocations using devices with BindingConditions",
            "# TYPE scheduler_dra_bindingconditions_allocations_total counter",
            f'scheduler_dra_bindingconditions_allocations_total{{driver="{GPU}",profile="default-scheduler",status="success"}} {3 * n}',
            f'scheduler_dra_bindingconditions_allocations_total{{driver="{GPU}",profile="default-scheduler",status="timeout"}} {n}',
        ]
        lines += histogram(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            "[ALPHA] Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
            WAIT_BUCKETS,
            WAITS,
            n,
        )
    return lines


CLAIMS = [("true", "false", "resource_claim_template", 5), ("false", "false", "", 2), ("true", "true", "", 1)]


def controller_manager(n):
    return [
        "# HELP resourceclaim_controller_creates_total [ALPHA] Number of ResourceClaims creation requests",
        "# TYPE resourceclaim_controller_creates_total counter",
        f'resourceclaim_controller_creates_total{{admin_access="false",status="success"}} {2 * n}',
        f'resourceclaim_controller_creates_total{{admin_access="false",status="failure"}} {n}',
        "# HELP resourceclaim_controller_resource_claims [ALPHA] Number of ResourceClaims",
        "# TYPE resourceclaim_controller_resource_claims gauge",
        *(
            f'resourceclaim_controller_resource_claims{{admin_access="{a}",allocated="{al}",source="{s}"}} {v}'
            for al, a, s, v in CLAIMS
        ),
    ]


class ControlPlane(http.server.ThreadingHTTPServer):
    """Every component's /metrics on one port, by path; each scrape of a path counts as one more round
    of the observations above (so counters grow at a steady rate)."""

    def __init__(self):
        self.scrapes = {}
        self.binding = False
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", free_port()), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def address(self):
        return f"127.0.0.1:{self.server_address[1]}"

    def body(self, path):
        with self.lock:
            n = self.scrapes[path] = self.scrapes.get(path, 0) + 1
        if path.startswith("/kubelet/"):
            return kubelet(path.split("/")[2], n)
        if path == "/scheduler/metrics":
            return scheduler(n, self.binding)
        if path == "/controller-manager/metrics":
            return controller_manager(n)
        return None


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        lines = self.server.body(self.path)
        body = ("\n".join(lines) + "\n").encode() if lines is not None else b"not found"
        self.send_response(200 if lines is not None else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def target(address, path, **labels):
    return {"targets": [address], "labels": {"__metrics_path__": path, **labels}}


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    plane = ControlPlane()
    a = plane.address
    prom = Prometheus(
        tmp_path_factory.mktemp("prom"),
        [
            # As the Prometheus operator scrapes kubelets: job "kubelet", the node in a "node" label.
            {
                "job_name": "kubelet",
                "static_configs": [
                    target(a, "/kubelet/node-1/metrics", node="node-1"),
                    target(a, "/kubelet/node-2/metrics", node="node-2"),
                ],
            },
            {"job_name": "kube-scheduler", "static_configs": [target(a, "/scheduler/metrics")]},
            {"job_name": "kube-controller-manager", "static_configs": [target(a, "/controller-manager/metrics")]},
        ],
    ).start()
    try:
        # Enough scrapes for rates (two samples at least) on every target.
        prom.wait_for("count(count_over_time(dra_resource_claims_in_use[1m]) >= 3) == 5")
        prom.wait_for("count_over_time(resourceclaim_controller_creates_total[1m]) >= 3")
        # ... the scheduler's too: the figures are read a second in the past, where each of the four
        # targets must still have two samples for a rate (a loaded machine delays the first scrapes).
        prom.wait_for("count(count_over_time(up[1m]) >= 4) == 4")
        yield plane, prom
    finally:
        prom.stop()
        plane.shutdown()
        plane.server_close()


@pytest.fixture
def source(scraped):
    plane, prom = scraped
    cluster = Cluster.objects.create(name="gpus")
    return PrometheusSource.objects.create(cluster=cluster, url=prom.url)


def quantile(q, per_scrape, buckets):
    """Prometheus's classic histogram_quantile over bucket counts that grow in a fixed proportion
    (every rate is the same multiple of them, so the quantile is the counts' quantile)."""
    counts = [per_scrape.get(i, 0) for i in range(len(buckets) + 1)]
    total = sum(counts)
    rank = q * total
    cumulative = 0
    for i, c in enumerate(counts):
        if cumulative + c >= rank and c:
            if i == len(buckets):  # +Inf: the last finite upper bound
                return buckets[-1]
            lower = buckets[i - 1] if i else 0.0
            return lower + (buckets[i] - lower) * (rank - cumulative) / c
        cumulative += c
    raise AssertionError("empty histogram")


def merged(series, **match):
    """Observations per scrape of the series matching `match`, summed (what `sum by` does)."""
    out = {}
    for labels, per_scrape in series:
        if all(labels.get(k) == v for k, v in match.items()):
            for i, c in per_scrape.items():
                out[i] = out.get(i, 0) + c
    return out


def rows(result):
    return dict(result.rows)


def prom_rows(prom, promql, labels, at):
    body = prom.api("query", query=promql, time=f"{at:.3f}")
    assert body["status"] == "success", body
    return {
        tuple(s["metric"].get(lb, "") for lb in labels): float(s["value"][1])
        for s in body["data"]["result"]
        if math.isfinite(float(s["value"][1]))
    }


def test_figures_equal_promql_over_the_fixture(source, scraped):
    plane, prom = scraped
    at = time.time() - 1
    results = {r.figure.key: r for r in drametrics.evaluate(source, "5m", at=at)}
    assert set(results) == set(drametrics.BY_KEY)

    # Every value of every figure is what Prometheus answers to the PromQL the figure shows.
    for r in results.values():
        if r.status != drametrics.OK:
            continue
        for column in r.figure.columns:
            expected = prom_rows(prom, r.queries[column.key], r.labels, at)
            got = {values: vals[column.key] for values, vals in r.rows if column.key in vals}
            assert got.keys() == expected.keys(), (r.figure.key, column.key)
            for key, value in expected.items():
                assert got[key] == pytest.approx(value, rel=1e-9), (r.figure.key, column.key, key)

    # Preparation latency by driver and node: the quantiles of the fixture's buckets.
    grpc = results["kubelet_grpc"]
    assert grpc.status == drametrics.OK and grpc.jobs == {"kubelet": 5} and not grpc.missing_node_label
    table = rows(grpc)
    assert set(table) == {
        (GPU, PREPARE, "node-1"),
        (GPU, UNPREPARE, "node-1"),
        (GPU, PREPARE, "node-2"),
        (NIC, PREPARE, "node-2"),
    }
    node1 = KUBELET_GRPC["node-1"]
    node2 = KUBELET_GRPC["node-2"]
    for q, key in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
        want = quantile(q, merged(node1, method_name=PREPARE), DRA_BUCKETS)
        assert table[(GPU, PREPARE, "node-1")][key] == pytest.approx(want, rel=1e-9)
        want = quantile(q, merged(node2, method_name=PREPARE, driver_name=GPU), DRA_BUCKETS)
        assert table[(GPU, PREPARE, "node-2")][key] == pytest.approx(want, rel=1e-9)
    # The page shows the slowest rows first (a big fleet has a row per node and driver), the API all.
    shown, total = drametrics.page_rows(grpc, limit=2)
    assert total == 4 and [values for values, _ in shown] == [(GPU, PREPARE, "node-2"), (GPU, PREPARE, "node-1")]
    assert table[(GPU, PREPARE, "node-1")]["p50"] == pytest.approx(0.1)  # half the calls in the first bucket
    assert table[(GPU, PREPARE, "node-2")]["p99"] == pytest.approx(40.0)  # the timeouts sit in +Inf
    # Failed calls: node-2's DeadlineExceeded; node-1 has no failed series, so no value (not zero).
    assert table[(GPU, PREPARE, "node-2")]["errors"] > 0
    assert "errors" not in table[(GPU, PREPARE, "node-1")]
    # Calls per second follow the fixture's proportions: node-1 prepares 4 per scrape, unprepares 4.
    assert table[(GPU, PREPARE, "node-1")]["calls"] == pytest.approx(table[(GPU, UNPREPARE, "node-1")]["calls"])

    ops = rows(results["kubelet_operations"])
    assert ops[("PrepareResources", "node-2")]["errors"] > 0 and "errors" not in ops[("PrepareResources", "node-1")]
    assert ops[("PrepareResources", "node-1")]["p50"] == pytest.approx(
        quantile(0.5, merged(KUBELET_OPS["node-1"]), DRA_BUCKETS)
    )

    in_use = rows(results["kubelet_claims_in_use"])
    assert {k: v["claims"] for k, v in in_use.items()} == {
        (d, node): float(v) for node, per in CLAIMS_IN_USE.items() for d, v in per.items()
    }

    plugin = rows(results["scheduler_plugin"])
    assert set(plugin) == {
        ("PreFilter", "Success"),
        ("Filter", "Success"),
        ("Filter", "Unschedulable"),
        ("Reserve", "Success"),
    }
    assert plugin[("Filter", "Success")]["p95"] == pytest.approx(
        quantile(
            0.95, merged(PLUGIN, plugin="DynamicResources", extension_point="Filter", status="Success"), PLUGIN_BUCKETS
        )
    )  # NodeResourcesFit's series are not mixed in

    claims = rows(results["claims"])
    assert {k: v["claims"] for k, v in claims.items()} == {(al, a, s): float(v) for al, a, s, v in CLAIMS}
    creates = rows(results["claim_creates"])
    assert creates[("success", "false")]["increase"] == pytest.approx(
        2 * creates[("failure", "false")]["increase"], rel=1e-6
    )

    # The binding-condition metrics are not served (gate off): absent, no rows, never a zero.
    for key in ("binding_allocations", "binding_wait"):
        assert results[key].status == drametrics.ABSENT and results[key].rows == [] and results[key].jobs == {}
        assert results[key].as_json()["rows"] == []


def test_page_and_api_show_promql_values_and_absence(source, scraped, settings):
    plane, prom = scraped
    settings.GPUDASH_MONITORING = {**settings.GPUDASH_MONITORING, "DRA_PAGE_ROWS": 3}
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get("/dra-metrics/?cluster=gpus&window=5m").content.decode()
    assert 'data-figure="kubelet_grpc" data-status="ok"' in page
    assert 'data-figure="binding_wait" data-status="absent"' in page
    assert "Not scraped: Prometheus holds no series of scheduler_dra_bindingconditions_wait_duration_seconds" in page
    # The PromQL is on the page, as run.
    grpc = drametrics.BY_KEY["kubelet_grpc"]
    promql = drametrics.column_promql(grpc, grpc.columns[1], "5m")
    assert promql.startswith("histogram_quantile(0.95, sum by (le, driver_name, method_name, node)")
    assert f'<code data-promql="p95">{promql}</code>' in page.replace("&quot;", '"')
    # node-1 has no failed calls: its cell says so rather than 0.
    assert "no data" in page
    assert "The 3 slowest rows (by p95) of 4;" in page and "The first 3 rows of 5;" in page  # cut at 3
    assert "DRA metrics" in client.get("/readiness/").content.decode()  # linked from the navigation
    assert client.get("/dra-metrics/?window=2d").status_code == 400

    # In Chinese: no English left beside the metric, label and driver names (kept as Kubernetes writes them).
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    zh = client.get("/dra-metrics/?cluster=gpus&window=5m", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert (
        "DRA 控制面指标" in zh
        and "未抓取：Prometheus 中没有 scheduler_dra_bindingconditions_wait_duration_seconds 的任何序列。" in zh
    )
    assert english_words(zh, KUBERNETES_TERMS | {"viewer"}) == {}
    del client.cookies[settings.LANGUAGE_COOKIE_NAME]

    api = APIClient()
    api.force_authenticate(make_user("api-viewer"))
    body = api.get(
        "/api/v1/dra-metrics", {"cluster": "gpus", "figure": ["kubelet_claims_in_use", "binding_wait"]}
    ).json()
    [cluster] = body["clusters"]
    figures = {f["key"]: f for f in cluster["figures"]}
    assert set(figures) == {"kubelet_claims_in_use", "binding_wait"} and body["node_label"] == "node"
    assert figures["binding_wait"]["status"] == "absent" and figures["binding_wait"]["rows"] == []
    in_use = {
        (r["labels"]["driver_name"], r["labels"]["node"]): r["values"]["claims"]
        for r in figures["kubelet_claims_in_use"]["rows"]
    }
    assert in_use[("<any>", "node-2")] == 2.0
    assert (
        figures["kubelet_claims_in_use"]["columns"][0]["promql"]
        == "max by (driver_name, node) (dra_resource_claims_in_use)"
    )
    assert api.get("/api/v1/dra-metrics", {"figure": "nope"}).status_code == 400
    assert api.get("/api/v1/dra-metrics", {"window": "7d"}).status_code == 400


def test_unconfigured_cluster_and_prometheus_down(scraped):
    client = Client()
    client.force_login(make_user("viewer"))
    cluster = Cluster.objects.create(name="bare")
    page = client.get("/dra-metrics/?cluster=bare").content.decode()
    assert "No Prometheus is configured for bare." in page and "docs/dra-metrics.md" in page

    PrometheusSource.objects.create(cluster=cluster, url=f"http://127.0.0.1:{free_port()}")
    results = drametrics.evaluate(PrometheusSource.objects.get(cluster=cluster))
    assert {r.status for r in results} == {drametrics.ERROR}
    assert all("Connection refused" in r.error or "NewConnectionError" in r.error for r in results)
    page = client.get("/dra-metrics/?cluster=bare").content.decode()
    assert "Query failed" in page and 'data-status="ok"' not in page


def test_binding_metrics_appear_when_served_and_a_selector_matching_nothing_is_absent(source, scraped):
    # Last in the module: once served, the binding metrics stay in the 5 minutes' window of later tests.
    plane, prom = scraped
    plane.binding = True
    try:
        prom.wait_for("count_over_time(scheduler_dra_bindingconditions_allocations_total[1m]) >= 3")
        at = time.time() - 1
        results = {
            r.figure.key: r
            for r in drametrics.evaluate(source, "5m", keys={"binding_allocations", "binding_wait"}, at=at)
        }
        assert set(results) == {"binding_allocations", "binding_wait"}
        alloc = rows(results["binding_allocations"])
        assert set(alloc) == {(GPU, "success"), (GPU, "timeout")}
        assert alloc[(GPU, "success")]["increase"] == pytest.approx(3 * alloc[(GPU, "timeout")]["increase"], rel=1e-6)
        wait = rows(results["binding_wait"])
        assert wait[(GPU, "timeout")]["p50"] == pytest.approx(WAIT_BUCKETS[-1])  # all in +Inf
        assert wait[(GPU, "success")]["p50"] == pytest.approx(quantile(0.5, WAITS[0][1], WAIT_BUCKETS))
    finally:
        plane.binding = False

    source.series_selector = 'cluster="elsewhere"'
    source.save()
    results = drametrics.evaluate(source, "5m")
    assert {r.status for r in results} == {drametrics.ABSENT}
    assert all('cluster="elsewhere"' in q for r in results for q in [r.presence, *r.queries.values()])
