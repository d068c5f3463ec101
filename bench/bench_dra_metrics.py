"""DRA control-plane metrics page at fleet scale: how long gpudash takes to ask a real Prometheus for
every figure (monitoring/drametrics.py) when N kubelets report DRA metrics.

    .venv/bin/python bench/bench_dra_metrics.py [--nodes 1000] [--runs 5]

One endpoint served here stands for every kubelet (the node in a `node` label, `honor_labels`), a
scheduler and a controller manager, with the v1.36 metric names and buckets; counters grow over the
first four scrapes so rates and quantiles have values. Debian's `prometheus` scrapes it every 3 s. Timed: the
evaluation of all figures (30 instant queries, four at a time) and the page's row formatting
of the biggest figure; then the page's way (monitoring/views.py DRAMetricsView): its first paint
(start the shared evaluation, wait FIRST_PAINT for what is done, format it), when the first and the last
figure arrive after it, and a reload while the evaluation is kept (DRA_CACHE_SECONDS). Needs no
database. Figures are printed, not asserted.
"""

import argparse
import http.server
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")

import django  # noqa: E402

django.setup()

from monitoring import drametrics  # noqa: E402
from monitoring.views import DRAMetricsView  # noqa: E402

GRPC = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
DRA_BUCKETS = [0.1 * (400 ** (1 / 14)) ** i for i in range(15)]
PLUGIN_BUCKETS = [0.00001 * 1.5**i for i in range(20)]


def histogram(lines, name, buckets, labels, per_scrape, n):
    cumulative = 0
    for i, upper in enumerate([*buckets, None]):
        cumulative += per_scrape.get(i, 0) * n
        le = "+Inf" if upper is None else repr(upper)
        lines.append(f'{name}_bucket{{{labels},le="{le}"}} {cumulative}')
    lines.append(f"{name}_sum{{{labels}}} {sum(per_scrape.values()) * n * 0.2}")
    lines.append(f"{name}_count{{{labels}}} {sum(per_scrape.values()) * n}")


def exposition(nodes, n):
    lines = [
        "# TYPE dra_grpc_operations_duration_seconds histogram",
    ]
    for i in range(nodes):
        node = f"gpu-node-{i:05d}"
        for method, spread in (
            ("NodePrepareResources", {0: 2, 2 + i % 5: 1, 6: 1}),
            ("NodeUnprepareResources", {0: 3}),
        ):
            labels = f'node="{node}",driver_name="gpu.nvidia.com",method_name="{GRPC}{method}",grpc_status_code="OK"'
            histogram(lines, "dra_grpc_operations_duration_seconds", DRA_BUCKETS, labels, spread, n)
    lines.append("# TYPE dra_operations_duration_seconds histogram")
    for i in range(nodes):
        node = f"gpu-node-{i:05d}"
        for op in ("PrepareResources", "UnprepareResources"):
            labels = f'node="{node}",operation_name="{op}",is_error="false"'
            histogram(lines, "dra_operations_duration_seconds", DRA_BUCKETS, labels, {1: 2, 3 + i % 4: 1}, n)
    lines.append("# TYPE dra_resource_claims_in_use gauge")
    for i in range(nodes):
        for driver in ("<any>", "gpu.nvidia.com"):
            lines.append(f'dra_resource_claims_in_use{{node="gpu-node-{i:05d}",driver_name="{driver}"}} {i % 9}')
    lines.append("# TYPE scheduler_plugin_execution_duration_seconds histogram")
    for point, spread in (("PreFilter", {6: 3}), ("Filter", {2: 50, 5: 10}), ("Reserve", {4: 1}), ("PreBind", {9: 1})):
        labels = f'plugin="DynamicResources",extension_point="{point}",status="Success"'
        histogram(lines, "scheduler_plugin_execution_duration_seconds", PLUGIN_BUCKETS, labels, spread, n)
    lines += [
        "# TYPE resourceclaim_controller_creates_total counter",
        f'resourceclaim_controller_creates_total{{status="success",admin_access="false"}} {40 * n}',
        "# TYPE resourceclaim_controller_resource_claims gauge",
        f'resourceclaim_controller_resource_claims{{allocated="true",admin_access="false",source="resource_claim_template"}} {nodes * 4}',
    ]
    return ("\n".join(lines) + "\n").encode()


class Endpoint(http.server.ThreadingHTTPServer):
    def __init__(self, nodes):
        self.nodes, self.n = nodes, 0
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        # Four rounds of growth, then the same answer: rates over the window stay non-zero, and
        # building 70,000 lines in Python every scrape no longer competes with the timed queries.
        server = self.server
        if server.n < 4:
            server.n += 1
            server.body = exposition(server.nodes, server.n)
        body = server.body
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def query(url, promql):
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=30) as r:
        return json.loads(r.read())["data"]["result"]


def page_context(source):
    """What the page's view does before it renders: the shared evaluation, FIRST_PAINT's wait, the
    finished figures' rows."""
    evaluation = drametrics.cached(source, "5m")
    evaluation.wait(DRAMetricsView.FIRST_PAINT)
    for r in evaluation.results:
        if evaluation.finished(r):
            drametrics.page_rows(r)
    return evaluation


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    binary = shutil.which("prometheus")
    if not binary:
        sys.exit("needs Debian's prometheus package")
    endpoint = Endpoint(args.nodes)
    work = Path(tempfile.mkdtemp(prefix="bench-dra-prom-"))
    with socket.socket() as probe:  # a free port for Prometheus
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = {
        "global": {"scrape_interval": "3s", "scrape_timeout": "2900ms"},
        "scrape_configs": [
            {
                "job_name": "kubelet",
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{endpoint.server_address[1]}"]}],
            }
        ],
    }
    (work / "prometheus.yml").write_text(json.dumps(config))
    log = open(work / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                found = query(url, "count(count_over_time(dra_resource_claims_in_use[1m]) >= 3)")
                if found and int(float(found[0]["value"][1])) == 2 * args.nodes and endpoint.n >= 4:
                    break
            except OSError:
                pass
            time.sleep(1)
        else:
            sys.exit("Prometheus did not get three scrapes in 120 s: " + (work / "prometheus.log").read_text()[-2000:])
        series = int(float(query(url, 'count({job="kubelet"})')[0]["value"][1]))
        source = SimpleNamespace(pk=1, url=url, series_selector="", auth_header="")
        walls, page = [], []
        for _ in range(args.runs):
            started = time.perf_counter()
            results = drametrics.evaluate(source, "5m")
            walls.append(time.perf_counter() - started)
            errors = [r.error for r in results if r.error]
            if errors:  # e.g. Prometheus' own query timeout (GPUDASH_PROMETHEUS_TIMEOUT) on a busy machine
                print(f"{len(errors)} figure(s) failed: {errors[0][:300]}")
            biggest = max(results, key=lambda r: len(r.rows))
            started = time.perf_counter()
            drametrics.page_rows(biggest)
            page.append(time.perf_counter() - started)
        paints, firsts, lasts, reloads, at_paint = [], [], [], [], []
        for _ in range(args.runs):
            drametrics.forget_cached()
            started = time.perf_counter()
            evaluation = page_context(source)
            paints.append(time.perf_counter() - started)
            at_paint.append(evaluation.done_count)
            evaluation.wait_for_more(0, None)
            firsts.append(time.perf_counter() - started)
            evaluation.wait()
            lasts.append(time.perf_counter() - started)
            started = time.perf_counter()
            page_context(source)
            reloads.append(time.perf_counter() - started)
        print(
            f"nodes: {args.nodes}, series: {series:,}, biggest figure: {biggest.figure.key} ({len(biggest.rows):,} rows)"
        )
        print(
            f"page first paint: median {statistics.median(paints) * 1000:.0f} ms (max {max(paints) * 1000:.0f}; "
            f"{min(at_paint)}-{max(at_paint)} of {len(drametrics.FIGURES)} figures in it); "
            f"first figure at median {statistics.median(firsts) * 1000:.0f} ms, last at "
            f"{statistics.median(lasts) * 1000:.0f} ms; reload while kept: median "
            f"{statistics.median(reloads) * 1000:.1f} ms"
        )
        print(
            f"evaluate all figures: median {statistics.median(walls) * 1000:.0f} ms, "
            f"max {max(walls) * 1000:.0f} ms over {args.runs} runs; "
            f"page rows of the biggest: median {statistics.median(page) * 1000:.1f} ms; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
    finally:
        proc.terminate()
        proc.wait(30)
        endpoint.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
