"""A real Prometheus server (Debian's `prometheus` package, `.ci/run` installs it) for the metrics and
utilization tests: started on 127.0.0.1 with a temporary config, queried through its HTTP API."""

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from tests.browser import free_port, stop_process

PROMETHEUS = shutil.which("prometheus")
# Skipped only outside CI: in CI a missing package is an install bug, so the test fails instead.
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None and not os.environ.get("CI"), reason="needs Debian's prometheus package (.ci/run installs it)"
)


class Prometheus:
    def __init__(self, tmp_path, scrape_configs):
        self.dir = tmp_path / "prometheus"
        self.dir.mkdir()
        self.port = free_port()
        # 1 s scrapes and evaluation: the tests see new samples within seconds.
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "scrape_configs": scrape_configs,
        }
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.proc = None
        self.log = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        assert PROMETHEUS, "Debian's prometheus package is not installed (.ci/run installs it)"
        self.log = open(self.dir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.dir / "prometheus.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise AssertionError("prometheus did not get ready within 30 s")

    def stop(self):
        stop_process(self.proc)
        if self.log:
            self.log.close()

    def api(self, path, **params):
        """The decoded JSON envelope of GET /api/v1/<path> (error answers included)."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())

    def query(self, promql):
        """{frozenset(labels without __name__): float value} of an instant query."""
        body = self.api("query", query=promql)
        assert body["status"] == "success", (promql, body)
        return {
            frozenset((k, v) for k, v in s["metric"].items() if k != "__name__"): float(s["value"][1])
            for s in body["data"]["result"]
        }

    def wait_for(self, promql, predicate=bool, timeout=20):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.query(promql)
            if predicate(last):
                return last
            time.sleep(0.3)
        raise AssertionError(
            f"{promql}: still {last!r} after {timeout}s; log: {(self.dir / 'prometheus.log').read_text()[-2000:]}"
        )


def by(result, *labels):
    """An instant-query result keyed by the values of `labels`."""
    out = {}
    for key, value in result.items():
        d = dict(key)
        out[tuple(d.get(label, "") for label in labels)] = value
    return out
