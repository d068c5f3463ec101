"""Hypothesis fuzz of POST /api/v1/preview on the real server (`manage.py serve`): claims with random
values at the fields the engine reads, random CEL selectors, random text as YAML. No answer is a 5xx,
every error is the API's JSON error, and /healthz answers after every example."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token

from mirror import roles
from tests.api_fixtures import load_fleet, make_user
from tests.serve_fixtures import HEALTHZ_TIMEOUT, serve  # noqa: F401

pytestmark = pytest.mark.slow
FUZZ = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
# Where a random value lands in an otherwise good claim / pod.
PATHS = [
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("spec",),
    ("spec", "devices"),
    ("spec", "devices", "requests"),
    ("spec", "devices", "requests", 0),
    ("spec", "devices", "requests", 0, "name"),
    ("spec", "devices", "requests", 0, "exactly"),
    ("spec", "devices", "requests", 0, "exactly", "count"),
    ("spec", "devices", "requests", 0, "exactly", "allocationMode"),
    ("spec", "devices", "requests", 0, "exactly", "selectors"),
    ("spec", "devices", "requests", 0, "exactly", "selectors", 0),
    ("spec", "devices", "requests", 0, "exactly", "tolerations"),
    ("spec", "devices", "requests", 0, "exactly", "capacity"),
    ("spec", "devices", "requests", 0, "exactly", "adminAccess"),
    ("spec", "devices", "requests", 0, "firstAvailable"),
    ("spec", "devices", "constraints"),
    ("spec", "devices", "config"),
    ("kind",),
    ("apiVersion",),
    ("status",),
]
POD_PATHS = [
    ("spec",),
    ("spec", "resourceClaims"),
    ("spec", "resourceClaims", 0),
    ("spec", "containers"),
    ("spec", "containers", 0),
    ("spec", "containers", 0, "resources"),
    ("spec", "containers", 0, "resources", "limits"),
]


def good_claim():
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "fuzz", "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "count": 1,
                            "selectors": [{"cel": {"expression": "true"}}],
                        },
                    }
                ]
            }
        },
    }


def good_pod():
    return {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"gpu": "1"}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "pending"}],
        },
    }


def put(doc, path, value):
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


ATTR = 'device.attributes["gpu.nvidia.com"]'
CEL_ATOMS = st.sampled_from(
    [
        "device.driver",
        f"{ATTR}.productName",
        f"{ATTR}.index",
        f"{ATTR}.driverVersion",
        'device.capacity["gpu.nvidia.com"].memory',
        '"gpu.nvidia.com"',
        "1",
        "-3",
        "true",
        '""',
        'quantity("40Gi")',
        'semver("1.2.3")',
        "[1, 2, 3]",
        '{"a": 1}',
        "device.allowMultipleAllocations",
    ]
)
CEL = st.recursive(
    CEL_ATOMS,
    lambda e: st.one_of(
        st.tuples(e, st.sampled_from(["==", "!=", "<", ">=", "&&", "||", "+", "in"]), e).map(" ".join),
        e.map(lambda x: f"!({x})"),
        e.map(lambda x: f"size({x})"),
        st.tuples(e, st.sampled_from([".startsWith", ".matches", ".contains", ".isGreaterThan", ".compareTo"]), e).map(
            lambda t: f"{t[0]}{t[1]}({t[2]})"
        ),
        st.tuples(e, e).map(lambda t: f"[{t[0]}, {t[1]}].all(x, {t[0]})"),
        st.tuples(e, e, e).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
    ),
    max_leaves=6,
) | st.text(max_size=40)


@pytest.fixture
def token(transactional_db):
    load_fleet()
    return Token.objects.create(user=make_user("fuzzer", roles.OPERATOR)).key


def check(serve, token, yaml_text):  # noqa: F811
    body = {"cluster": "alpha", "namespace": "team-a", "yaml": yaml_text}
    status, answer, ctype = serve.request("POST", "/api/v1/preview", body, token=token)
    assert status < 500, (status, answer, yaml_text)
    assert ctype.startswith("application/json"), (status, ctype)
    if status != 200:
        assert set(answer) == {"error"} and answer["error"]["message"], answer
    health, _, _ = serve.request("GET", "/healthz", timeout=HEALTHZ_TIMEOUT)
    assert health == 200
    return status, answer


def test_random_values_at_the_fields_the_engine_reads(serve, token):  # noqa: F811
    @FUZZ
    @given(
        st.sampled_from([(good_claim, PATHS), (good_pod, POD_PATHS)]).flatmap(
            lambda pair: st.tuples(st.just(pair[0]), st.sampled_from(pair[1]), JSON_VALUES)
        )
    )
    def run(case):
        make, path, value = case
        status, answer = check(serve, token, json.dumps(put(make(), path, value)))
        assert status in (200, 400), (status, answer)  # the shapes are checked: the engine never fails on them

    run()


def test_random_cel_selectors(serve, token):  # noqa: F811
    @FUZZ
    @given(CEL)
    def run(expression):
        check(
            serve,
            token,
            json.dumps(
                put(
                    good_claim(),
                    ("spec", "devices", "requests", 0, "exactly", "selectors", 0, "cel", "expression"),
                    expression,
                )
            ),
        )

    run()


def test_random_text_as_yaml(serve, token):  # noqa: F811
    @FUZZ
    @given(st.text(max_size=120) | st.text(alphabet="[]{}:-,'\"\\ \nabk#&*!|>%@`", max_size=80))
    def run(text):
        check(serve, token, text or " ")

    run()
