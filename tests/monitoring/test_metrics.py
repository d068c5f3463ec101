"""/metrics scraped by a real Prometheus: the values PromQL returns are the mirror's, the Grafana
dashboard's queries are accepted by that Prometheus, the bearer token is enforced."""

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from claims.models import AuditEntry, ResourceClaim
from claims.stuck import detect
from inventory import fleet
from inventory.models import Node
from tests.browser import ROOT, free_port, stop_process, subprocess_env, wait_until
from tests.prometheus_server import Prometheus, by, needs_prometheus
from tests.ui_fixtures import load_fleet

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-secret-token"
DASHBOARD = ROOT / "deploy" / "grafana" / "gpudash-dashboard.json"


def device_kind(device):
    """The kind by the rule the docs state, written out per device (not the summary's SQL)."""
    kind = device.attribute_value("type")
    if kind == "mig" or device.attribute_value("parentUUID") is not None:
        return "partition"
    return "gpu" if kind == "gpu" else "other"


def expected_devices(cluster):
    """(state, kind) -> devices, one device at a time through fleet.states_for (no summary involved)."""
    from inventory.models import Device

    return Counter((d.st.state, device_kind(d)) for d in fleet.states_for(Device.objects.filter(cluster=cluster)))


@pytest.fixture
def alpha(db):
    cluster = load_fleet()
    Node.objects.filter(cluster=cluster, name__in=["node-a", "node-c"]).update(
        labels={"karpenter.sh/nodepool": "h100-pool"}
    )
    AuditEntry.objects.create(username="op", cluster_name=cluster.name, action="remove_reservation", outcome="done")
    AuditEntry.objects.create(
        username="op", cluster_name=cluster.name, action="remove_reservation", outcome="dry-run", dry_run=True
    )
    detect(cluster)
    detect(cluster)
    return cluster


@pytest.fixture
def gpudash_server(tmp_path):
    port = free_port()
    env = dict(subprocess_env(), GPUDASH_METRICS_TOKEN=TOKEN)
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-watchers"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def answers():
        try:
            urllib.request.urlopen(url + "/healthz", timeout=2)
            return True
        except OSError:
            return proc.poll() is not None

    wait_until(answers, 60, "the gpudash server")
    assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
    yield url
    stop_process(proc)
    log.close()


def scrape(url, token=None):
    request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def dashboard_queries():
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if isinstance(v.get("query"), dict)]
    return exprs


def test_metrics_token_and_names(alpha, gpudash_server):
    assert scrape(gpudash_server)[0] == 401
    assert scrape(gpudash_server, "wrong")[0] == 401
    status, text = scrape(gpudash_server, TOKEN)
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(name.startswith("gpudash_") for name in families)
    for name in ("gpudash_sync_events_applied", "gpudash_release_actions", "gpudash_detector_runs"):
        assert families[name].type == "counter"  # exposed with the _total suffix
    assert families["gpudash_preview_duration_seconds"].type == "histogram"
    # Every gpudash metric the Grafana dashboard uses is one /metrics exposes.
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    exposed = {f.name + suffix for f in families.values() for suffix in suffixes[f.type]}
    used = {m for expr in dashboard_queries() for m in re.findall(r"\bgpudash_[a-z_]+", expr)}
    assert used and used <= exposed, used - exposed


@needs_prometheus
def test_prometheus_scrapes_the_mirror(alpha, gpudash_server, tmp_path):
    target = gpudash_server.removeprefix("http://")
    prom = Prometheus(
        tmp_path,
        [
            {"job_name": "gpudash", "static_configs": [{"targets": [target]}], "authorization": {"credentials": TOKEN}},
            {
                "job_name": "gpudash-wrong-token",
                "static_configs": [{"targets": [target]}],
                "authorization": {"credentials": "nope"},
            },
        ],
    ).start()
    try:
        prom.wait_for('gpudash_devices{job="gpudash"}')
        assert prom.wait_for('up{job="gpudash-wrong-token"}') == {
            frozenset({("job", "gpudash-wrong-token"), ("instance", target)}): 0.0
        }

        devices = by(
            prom.query('sum by (state, kind) (gpudash_devices{job="gpudash", cluster="alpha"})'), "state", "kind"
        )
        assert devices == {k: float(n) for k, n in expected_devices(alpha).items()}
        assert set(devices) >= {("allocated", "gpu"), ("partial", "gpu"), ("allocated", "partition"), ("stuck", "gpu")}

        claims = by(prom.query('sum by (state) (gpudash_claims{job="gpudash", cluster="alpha"})'), "state")
        assert claims == {
            (s,): float(n)
            for s, n in Counter(ResourceClaim.objects.filter(cluster=alpha).values_list("state", flat=True)).items()
        }
        assert prom.query('gpudash_pending_claims{job="gpudash"}') and by(
            prom.query('gpudash_pending_claims{job="gpudash"}'), "cluster"
        ) == {("alpha",): float(ResourceClaim.objects.filter(cluster=alpha, state=ResourceClaim.State.PENDING).count())}

        # Free whole GPUs per pool: node-a's free H100s (karpenter pool), node-b's A100 is partly used,
        # node-c is NotReady (its GPUs are not free), so the pool-less A100 row counts 0.
        free = by(prom.query('gpudash_free_whole_gpus{job="gpudash"}'), "node_pool", "model")
        node_a_free = sum(1 for d in fleet.states_for(alpha_devices(alpha, "node-a")) if d.st.state == fleet.FREE)
        assert free[("h100-pool", "NVIDIA H100 80GB HBM3")] == node_a_free > 0
        assert free[("h100-pool", "NVIDIA A100 80GB PCIe")] == 0  # node-c: NotReady

        findings = by(prom.query('sum by (rule) (gpudash_active_findings{job="gpudash"})'), "rule")
        from claims.models import Finding

        assert findings == {
            (r,): float(n) for r, n in Counter(Finding.objects.active().values_list("rule", flat=True)).items()
        }
        assert by(prom.query('gpudash_detector_runs_total{job="gpudash"}'), "cluster") == {("alpha",): 2.0}
        assert by(prom.query('gpudash_release_actions_total{job="gpudash"}'), "action", "outcome") == {
            ("remove_reservation", "done"): 1.0,
            ("remove_reservation", "dry-run"): 1.0,
        }
        assert by(prom.query('gpudash_sync_objects{job="gpudash"}'), "cluster", "kind") == {
            ("alpha", "ResourceClaim"): 0.0
        }

        # Every query of the Grafana dashboard parses and runs on this Prometheus.
        for expr in dashboard_queries():
            if expr.startswith("label_values("):
                name = re.match(r"label_values\((\w+), (\w+)\)", expr).groups()
                body = prom.api(f"label/{name[1]}/values", **{"match[]": name[0]})
            else:
                body = prom.api("query", query=expr.replace("$cluster", ".*"))
            assert body["status"] == "success", (expr, body)
        assert prom.api("query", query="sum by (state (gpudash_devices)")["status"] == "error"  # the check can fail
    finally:
        prom.stop()


def alpha_devices(cluster, node_name):
    from inventory.models import Device

    return Device.objects.filter(cluster=cluster, node_name=node_name)
