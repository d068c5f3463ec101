"""Preview page server time on the 5,000-node bench fleet (the one bench/bench_ui.py and bench_api.py load).

    .venv/bin/python bench/bench_preview.py [--runs 5]

In-process Django test client (sessions, auth, view, engine, template): figures are printed, not asserted.
Uses BENCH_DATABASE_URL (default: the `gpudash_bench_ui` database; load it first with bench/bench_ui.py).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ONE_GPU = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: %s, count: 1}
"""
EIGHT_GPUS = ONE_GPU.replace("count: 1", "count: 8").replace("one-gpu", "eight-gpus")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpudash_bench_ui")
    os.environ.pop("GPUDASH_TEST_DB_NAME", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # responses carry their template context (the report's counts)

    from inventory.models import Cluster, DeviceClass, Node

    settings.ALLOWED_HOSTS = ["*"]
    cluster = Cluster.objects.filter(name="bench").first()
    if cluster is None:
        sys.exit("no `bench` cluster: run bench/bench_ui.py first (it loads the fleet)")
    cls = next((n for n in DeviceClass.objects.filter(cluster=cluster).values_list("name", flat=True) if "gpu" in n), None)
    user = User.objects.filter(username="bench-ui").first() or User.objects.create_superuser("bench-ui", password="bench-ui-pass")
    client = Client()
    client.force_login(user)
    url = "/preview/?cluster=bench"
    print(f"fleet: {Node.objects.filter(cluster=cluster).count()} nodes; class {cls}")
    cases = [
        ("1 GPU, no headroom", {"yaml": ONE_GPU % cls, "namespace": "default"}),
        ("1 GPU + headroom", {"yaml": ONE_GPU % cls, "namespace": "default", "headroom": "1"}),
        ("1 GPU, fits page 40", {"yaml": ONE_GPU % cls, "namespace": "default", "show": "fits:40"}),
        ("8 GPUs + headroom", {"yaml": EIGHT_GPUS % cls, "namespace": "default", "headroom": "1"}),
    ]
    t0 = time.perf_counter()
    resp = client.post(url, cases[0][1])
    print(f"cold (builds the cluster's Inventory): {(time.perf_counter() - t0) * 1000:.0f} ms, {len(resp.content) // 1024} KiB")
    for name, data in cases:
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            resp = client.post(url, data)
            times.append((time.perf_counter() - t0) * 1000)
        assert resp.status_code == 200, resp.status_code
        report = resp.context["report"]
        engine = report.summary.get("seconds", 0) * 1000
        room = (report.headroom or {}).get("seconds")
        print(f"{name:24s} median {statistics.median(times):6.0f} ms  max {max(times):6.0f} ms  engine {engine:5.0f} ms"
              f"{f'  headroom {room * 1000:5.0f} ms' if room is not None else ''}  fit {report.fit_count}/{report.total}"
              f"  groups {len(resp.context['groups'])}  html {len(resp.content) // 1024} KiB")


if __name__ == "__main__":
    main()
