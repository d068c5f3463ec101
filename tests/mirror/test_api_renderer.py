"""The API's orjson renderer (mirror/api/renderers.py) writes what DRF's JSONRenderer writes."""

import datetime
import decimal
import json
import uuid

import pytest
from django.utils.translation import gettext_lazy
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.renderers import JSONRenderer as DRFRenderer

from mirror.api.renderers import JSONRenderer
from tests.api_fixtures import fleet, viewer  # noqa: F401

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_the_same_bytes_as_drf_for_json_data(data):
    assert JSONRenderer().render(data) == DRFRenderer().render(data)


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_read_back_equal(value):
    assert json.loads(JSONRenderer().render({"seconds": value})) == json.loads(DRFRenderer().render({"seconds": value}))


def test_values_orjson_leaves_to_drf_are_written_as_drf_writes_them():
    data = {
        "at": datetime.datetime(2026, 12, 6, 7, 30, 1, 123456, tzinfo=datetime.UTC),
        "day": datetime.date(2026, 12, 6),
        "naive": datetime.datetime(2026, 12, 6, 7, 30),
        "time": datetime.time(7, 30, 1, 500000),
        "amount": decimal.Decimal("1.25"),
        "uid": uuid.UUID("c170b447-70ce-4c57-a179-8cd7849b5f32"),
        "label": gettext_lazy("Free"),
        "set": {3},
        "keys": {1: "one", None: "none", False: "no"},
        "separators": "a\u2028b\u2029c",
        "tuple": (1, "two"),
    }
    assert JSONRenderer().render(data) == DRFRenderer().render(data)
    assert b"\\u2028" in JSONRenderer().render(data)


def test_what_orjson_cannot_write_and_pretty_output_go_to_drf():
    big = {"bytes": 2**70}
    assert JSONRenderer().render(big) == DRFRenderer().render(big) == b'{"bytes":1180591620717411303424}'
    pretty = JSONRenderer().render({"a": [1]}, "application/json; indent=2")
    assert pretty == DRFRenderer().render({"a": [1]}, "application/json; indent=2") and b"\n" in pretty
    assert JSONRenderer().render(None) == b""


@pytest.mark.django_db
def test_the_api_answers_with_it(fleet, viewer):  # noqa: F811
    """The setting puts it in front of every API view; its bytes are what DRF's renderer writes."""
    response = viewer.get("/api/v1/devices/?page_size=5")
    assert response.status_code == 200
    assert type(response.accepted_renderer) is JSONRenderer
    assert response.content == DRFRenderer().render(response.data)
