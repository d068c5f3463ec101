"""Monitoring benchmark on the 5,000-node fleet in PostgreSQL: a /metrics scrape, and one utilization
poll of 40,000 GPUs (query + join + store) through a real Prometheus.

    .venv/bin/python bench/bench_metrics.py [--nodes 5000] [--runs 20] [--polls 5] [--reload]

The fleet is bench_api's (devcluster.fleet.generate_fleet, 5,000 nodes x 8 GPUs), loaded once into
BENCH_DATABASE_URL (default: a `gpudash_bench_metrics` database on the local PostgreSQL). /metrics is
timed through Django's full stack in-process (test client), so the figure is server time. For the
poll, an exporter endpoint served here publishes dcgm-exporter's four fields for every whole GPU of
the fleet (UUIDs from the mirror, four duplicate per-container series for a tenth of them); Debian's
`prometheus` scrapes it and gpudash's poll queries that Prometheus. Figures are printed, not asserted.
"""

import argparse
import http.server
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench_metrics"

from fleetdb import add_fleet_arguments, load_average, open_fleet  # noqa: E402 (after the path set-up)


def exposition(gpus, rng):
    lines = []
    for metric, kind, value in (
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", lambda: rng.randint(0, 100)),
        ("DCGM_FI_DEV_FB_USED", "gauge", lambda: rng.randint(0, 81920)),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", lambda: f"{rng.uniform(60, 700):f}"),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", lambda: f"{rng.random():f}"),
    ):
        lines += [f"# HELP {metric} {metric}", f"# TYPE {metric} {kind}"]
        for i, (node, uuid) in enumerate(gpus):
            labels = (
                f'gpu="{i % 8}",UUID="{uuid}",pci_bus_id="00000000:{0x18 + i % 8:02X}:00.0",device="nvidia{i % 8}",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="{node}",DCGM_FI_DRIVER_VERSION="570.124.06"'
            )
            v = value()
            copies = 4 if i % 10 == 0 else 1  # pods with several containers: one series per container
            for c in range(copies):
                lines.append(f'{metric}{{{labels},container="c{c}",namespace="ns",pod="p{i}"}} {v}')
    return ("\n".join(lines) + "\n").encode()


class Exporter(http.server.ThreadingHTTPServer):
    def __init__(self, body):
        self.body = body
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args):
        pass


def time_metrics(runs):
    from django.test import Client

    client = Client()
    times = []
    for i in range(runs + 2):
        t0 = time.perf_counter()
        response = client.get("/metrics")
        elapsed = (time.perf_counter() - t0) * 1000
        assert response.status_code == 200, response.content[:300]
        if i >= 2:  # warm-up: connection, plans
            times.append(elapsed)
    body = response.content.decode()
    series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    return statistics.median(times), max(times), len(body), series


def time_polls(cluster, polls, workdir):
    from django.db.models import Q
    from django.db.models.fields.json import KT

    from inventory.models import Device
    from monitoring.models import PrometheusSource, UtilizationSample
    from monitoring.utilization import poll

    gpus = list(
        Device.objects.filter(cluster=cluster, attribute_values__type="gpu")
        .filter(~Q(attribute_values__uuid=None))
        .annotate(uuid=KT("attribute_values__uuid"))
        .values_list("node_name", "uuid")
    )
    exporter = Exporter(exposition(gpus, random.Random(1)))
    print(f"exporter: {len(gpus)} GPUs, {len(exporter.body) / 1e6:.1f} MB per scrape")
    prometheus = shutil.which("prometheus")
    config = Path(workdir) / "prometheus.yml"
    config.write_text(
        f"global: {{scrape_interval: 15s, scrape_timeout: 14s}}\nscrape_configs:\n"
        f"  - job_name: dcgm\n    static_configs: [{{targets: ['127.0.0.1:{exporter.server_address[1]}']}}]\n"
    )
    port = 19090 + random.randint(0, 500)
    proc = subprocess.Popen(
        [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir}/data",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        source, _ = PrometheusSource.objects.update_or_create(cluster=cluster, defaults={"url": url, "enabled": True})
        while time.monotonic() < deadline:  # Prometheus listening first, so no poll logs a refused connection
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5):
                    break
            except OSError:
                time.sleep(0.5)
        while time.monotonic() < deadline:
            try:
                r = poll(source)
                if not r.error and r.matched == len(gpus):
                    break
            except Exception:
                pass
            time.sleep(2)
        else:
            raise SystemExit("prometheus never had every GPU's series")
        UtilizationSample.objects.filter(cluster=cluster).delete()
        rows = []
        for i in range(polls):
            from django.utils import timezone

            t0, c0 = time.perf_counter(), time.process_time()
            r = poll(source, now=timezone.now() + timezone.timedelta(minutes=i + 1))
            total, cpu = time.perf_counter() - t0, time.process_time() - c0
            assert not r.error and r.matched == len(gpus), (r.error, r.matched)
            rows.append((total, r.seconds["query"], r.seconds["join"], r.seconds["store"], cpu))
        from monitoring import utilization

        utilization._index_cache.clear()  # as after a slice change: the devices' UUIDs are read again
        t0 = time.perf_counter()
        r = poll(source, now=timezone.now() + timezone.timedelta(minutes=polls + 1))
        print(
            f"\nfirst poll after the device rows changed (UUIDs re-read): {time.perf_counter() - t0:.2f} s, join {r.seconds['join']:.2f} s"
        )
        print(f"\nutilization poll of {len(gpus)} GPUs ({polls} polls; 4 instant queries each, in parallel):")
        print(
            f"{'':8} {'total s':>8} {'query s':>8} {'join s':>8} {'store s':>8} {'cpu s':>8}  (cpu: this process, not Prometheus' or PostgreSQL's)"
        )
        for label, pick in (("median", statistics.median), ("max", max)):
            print(f"{label:8} " + " ".join(f"{pick(col):8.2f}" for col in zip(*rows)))
    finally:
        proc.terminate()
        proc.wait(30)
        exporter.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fleet_arguments(parser)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--polls", type=int, default=5)
    args = parser.parse_args()
    os.environ.pop("GPUDASH_METRICS_TOKEN", None)
    # a loaded machine must not turn a slow poll into an error
    cluster = open_fleet(
        args, DEFAULT_DB, GPUDASH_PROMETHEUS_TIMEOUT=os.environ.get("GPUDASH_PROMETHEUS_TIMEOUT", "30")
    )
    print("load average at start:", load_average())
    p50, worst, size, series = time_metrics(args.runs)
    print(
        f"\n/metrics: p50 {p50:.1f} ms, max {worst:.1f} ms over {args.runs} scrapes; {series} samples, {size / 1e3:.0f} kB"
    )
    with tempfile.TemporaryDirectory() as workdir:
        time_polls(cluster, args.polls, workdir)
    p50, worst, size, series = time_metrics(args.runs)
    print(f"\n/metrics after the polls: p50 {p50:.1f} ms, max {worst:.1f} ms; {series} samples")
    print("load average at end:", load_average())


if __name__ == "__main__":
    main()
