"""The OpenAPI schema: valid, and a property-based fuzz run (schemathesis: every operation, bodies
generated from the schema, as an admin with a token) against the real server (`manage.py serve`)
finds no 5xx and no response that breaks the schema, while /healthz keeps answering."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from tests.api_fixtures import load_fleet
from tests.serve_fixtures import serve, while_in_flight  # noqa: F401

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.mark.django_db
def test_schema_is_served_and_lists_every_endpoint(client):
    r = client.get("/api/schema/?format=json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    for path in (
        "/api/v1/devices/",
        "/api/v1/claims/",
        "/api/v1/preview",
        "/api/v1/aggregates/devices",
        "/api/v1/audit/",
    ):
        assert path in paths, sorted(paths)
    device_params = {p["name"] for p in paths["/api/v1/devices/"]["get"]["parameters"]}
    assert {
        "attribute",
        "capacity",
        "state",
        "cluster",
        "node",
        "raw",
        "ordering",
        "page",
        "page_size",
    } <= device_params
    assert client.get("/api/docs/").status_code == 200


@pytest.mark.slow
def test_schemathesis_finds_no_server_errors(serve, transactional_db, tmp_path):  # noqa: F811
    load_fleet()
    admin = User.objects.create_superuser("fuzz", password="x")
    token = Token.objects.create(user=admin)
    cmd = [
        str(SCHEMATHESIS),
        "run",
        f"{serve.url}/api/schema/?format=json",
        "--url",
        serve.url,
        "--header",
        f"Authorization: Token {token.key}",
        "--checks",
        "not_a_server_error,response_schema_conformance",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        "8",
        "--max-time",
        "30",  # with the preview fuzz (tests/claims/test_fuzz_preview.py) well under a minute
        "--seed",
        "5",
        "--workers",
        "1",
        "--no-shrink",
        "--generation-deterministic",
        "--warnings",
        "off",
        "--report-dir",
        str(tmp_path),
    ]
    env = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false"}
    proc, health_checks = while_in_flight(
        serve, lambda: subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    )
    assert health_checks > 1  # /healthz answered all along
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "No issues found" in proc.stdout or " passed" in proc.stdout, proc.stdout[-3000:]
