"""REST API keyset (cursor) paging: `?cursor=` walks a list in the order page numbers give, with
the same filters, a fixed number of queries per page, and clear 400s for what it cannot page."""

from urllib.parse import urlsplit

import pytest

from tests.api_fixtures import fleet, queries_for, scoped_viewer, viewer  # noqa: F401

pytestmark = pytest.mark.django_db


def walk(client, url, page_size):
    """Every row id of a cursor walk, and the number of pages it took."""
    sep = "&" if "?" in url else "?"
    url, ids, pages = f"{url}{sep}cursor=&page_size={page_size}", [], 0
    while url:
        resp = client.get(url)
        assert resp.status_code == 200, resp.content
        body = resp.json()
        assert set(body) == {"next", "results"}  # no count: nothing scans the whole filtered set
        ids += [r["id"] for r in body["results"]]
        pages += 1
        url = body["next"] and urlsplit(body["next"])._replace(scheme="", netloc="").geturl()
    return ids, pages


WALKS = [
    "/api/v1/devices/",
    "/api/v1/devices/?state=free",
    "/api/v1/devices/?ordering=-name",
    "/api/v1/devices/?ordering=cluster,-pool",
    "/api/v1/devices/?capacity=memory>=40Gi",
    "/api/v1/nodes/?ordering=-name",
    "/api/v1/claims/",
    "/api/v1/claims/?ordering=-namespace,name",
    "/api/v1/pods/",
    "/api/v1/resource-slices/?ordering=driver",
    "/api/v1/clusters/",
    "/api/v1/audit/",
]


def test_cursor_walk_gives_the_rows_and_order_of_page_numbers(fleet, viewer):
    # One test over every list (the fleet costs more to load than all the walks).
    for url in WALKS:
        sep = "&" if "?" in url else "?"
        expected = [r["id"] for r in viewer.get(f"{url}{sep}page_size=1000").json()["results"]]
        assert len(expected) >= 2, url
        ids, pages = walk(viewer, url, 1)
        assert ids == expected and pages == len(expected), url
        assert walk(viewer, url, 3)[0] == expected, url


def test_cursor_keeps_the_namespace_scope(fleet, scoped_viewer):
    ids, _ = walk(scoped_viewer, "/api/v1/claims/", 1)
    assert ids == [r["id"] for r in scoped_viewer.get("/api/v1/claims/?page_size=1000").json()["results"]]
    assert {r["namespace"] for r in scoped_viewer.get("/api/v1/claims/?page_size=1000").json()["results"]} == {"team-a"}


def test_cursor_query_count_does_not_grow_with_page_size(fleet, viewer):
    url = "/api/v1/devices/?cluster=alpha&capacity=memory>=1Gi&cursor="
    one, small = queries_for(viewer, url + "&page_size=1")
    many, large = queries_for(viewer, url + "&page_size=1000")
    assert len(small.json()["results"]) == 1 and len(large.json()["results"]) > 5
    assert one == many
    second, _ = queries_for(viewer, urlsplit(small.json()["next"])._replace(scheme="", netloc="").geturl())
    assert second == one


REFUSALS = [
    ("/api/v1/claims/?ordering=creation_timestamp&cursor=", "may be empty"),  # nullable column
    ("/api/v1/devices/?cursor=not-a-cursor", "Invalid cursor"),
    ("/api/v1/devices/?cursor=eyJvIjpbXSwidiI6W119", "Invalid cursor"),  # {"o":[],"v":[]}: another ordering
    ("/api/v1/devices/?cursor=&page=2", "not both"),
]


def test_cursor_refusals_are_clear_400s_and_page_numbers_stay_the_default(fleet, viewer):
    for url, message in REFUSALS:
        resp = viewer.get(url)
        assert resp.status_code == 400, (url, resp.content)
        assert message in str(resp.json()), url
    token = viewer.get("/api/v1/devices/?cursor=&page_size=1").json()["next"].split("cursor=")[1].split("&")[0]
    assert (
        viewer.get(f"/api/v1/devices/?ordering=-name&cursor={token}").status_code == 400
    )  # a cursor of another ordering
    assert viewer.get(f"/api/v1/devices/?cursor={token}").status_code == 200
    body = viewer.get("/api/v1/devices/?page_size=2").json()
    assert set(body) == {"count", "next", "previous", "results"} and "page=2" in body["next"]


def test_counts_above_the_limit_are_estimated_labelled_and_pages_still_end_right(fleet, viewer, settings):
    everything = {
        url: [r["id"] for r in viewer.get(f"{url}?page_size=1000").json()["results"]]
        for url in ("/api/v1/devices/", "/api/v1/claims/")
    }
    settings.GPUDASH_API_EXACT_COUNT_LIMIT = 3
    for url, expected in everything.items():
        assert len(expected) > 4
        body = viewer.get(f"{url}?page_size=2").json()
        assert body["count_estimated"] is True and body["count"] >= 4, url  # the planner's figure, at least limit + 1
        ids, next_url = [], f"{url}?page_size=2"
        while next_url:
            body = viewer.get(next_url).json()
            ids += [r["id"] for r in body["results"]]
            next_url = body["next"] and urlsplit(body["next"])._replace(scheme="", netloc="").geturl()
        assert ids == expected, url  # `next` comes from an extra row, not from the estimate
        last = -(-len(expected) // 2)
        assert viewer.get(f"{url}?page_size=2&page={last + 1}").status_code == 404
    assert "count_estimated" not in viewer.get("/api/v1/nodes/").json()  # 3 nodes: exact, unlabelled
