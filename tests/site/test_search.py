"""The global search box and the global namespace selector (Django test client)."""

import re

import pytest
from django.urls import reverse

from tests.ui_fixtures import load_fleet, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]


def links(body, section):
    """{link text: href} of one result group of the search page."""
    m = re.search(rf'<section class="search-group" id="search-{section}">(.*?)</section>', body, re.S)
    return {text: href for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', m.group(1))} if m else {}


def test_search_finds_each_kind_by_name_and_uid_and_links_its_page(client, monkeypatch):
    load_fleet("alpha")
    client.force_login(make_user("alice"))
    url = reverse("ops:search")
    body = client.get(url, {"q": "train"}).content.decode()
    assert links(body, "claim") == {
        "team-a/train-1": reverse("claims:claim-detail", args=["alpha", "team-a", "train-1"])
    }
    assert links(body, "pod") == {
        "team-a/train-1-pod": reverse("claims:pod-detail", args=["alpha", "team-a", "train-1-pod"])
    }
    assert links(body, "node") == {}
    # by uid (exact), a node by name, a device by the GPU uuid it publishes
    assert "team-b/infer" in links(client.get(url, {"q": "uid-team-b-infer"}).content.decode(), "claim")
    assert links(client.get(url, {"q": "node-b"}).content.decode(), "node") == {
        "node-b": reverse("inventory:node-detail", args=["alpha", "node-b"])
    }
    body = client.get(url, {"q": "GPU-gpu-3"}).content.decode()
    assert links(body, "device") == {
        "gpu-3": reverse("inventory:device-detail", args=["alpha", "gpu.nvidia.com", "node-a", "gpu-3"])
    }
    # many hits: the first LIMIT and a link to the list with the same filter
    from ops import search

    monkeypatch.setattr(search, "LIMIT", 5)
    body = client.get(url, {"q": "gpu"}).content.decode()
    devices = re.search(r'id="search-device">(.*?)</section>', body, re.S).group(1)
    assert devices.count("<li>") == 5 and 'href="/devices/?q=device+~+gpu"' in devices
    assert 'id="search-count"' in client.get(url, {"q": "nothing-like-this"}).content.decode()
    # every page carries the box and the selector
    home = client.get(reverse("inventory:overview")).content.decode()
    assert 'id="global-search"' in home and 'id="namespace-select"' in home


def test_search_and_namespace_selector_keep_to_the_users_namespaces(client):
    load_fleet("alpha")
    client.force_login(make_user("bob", namespaces=["team-a"]))
    url = reverse("ops:search")
    body = client.get(url, {"q": "claim"}).content.decode()
    assert "team-a/pending-claim" in links(body, "claim") and "team-b/stuck-claim" not in body
    assert "team-b/infer" not in client.get(url, {"q": "uid-team-b-infer"}).content.decode()
    # a namespace outside the scope is not selectable, and selecting it selects nothing
    home = client.get(reverse("inventory:overview"), {"ns": "team-b"})
    assert home.context["global_namespace"] == "" and "team-b" not in home.context["namespace_options"]()


def test_namespace_selector_persists_across_pages(client):
    load_fleet("alpha")
    client.force_login(make_user("alice"))
    claims = lambda: sorted(c.name for c in client.get(reverse("claims:claim-list")).context["page_obj"])  # noqa: E731
    assert claims() == ["infer", "monitor", "pending-claim", "stuck-claim", "train-1"]
    page = client.get(reverse("inventory:node-list"), {"ns": "team-b"})  # picked on another page
    assert '<option value="team-b" selected>' in page.content.decode()
    assert claims() == ["infer", "stuck-claim"]
    assert [p.name for p in client.get(reverse("claims:pod-list")).context["pods"]] == []  # team-b runs no pod
    assert "namespace team-b" in client.get(reverse("ops:search"), {"q": "x"}).content.decode()
    assert "team-a/train-1" not in links(client.get(reverse("ops:search"), {"q": "train"}).content.decode(), "claim")
    # the page's own namespace filter wins for that request, and does not move the selector
    assert sorted(
        c.name for c in client.get(reverse("claims:claim-list"), {"namespace": "team-a"}).context["page_obj"]
    ) == ["pending-claim", "train-1"]
    assert claims() == ["infer", "stuck-claim"]
    client.get(reverse("inventory:overview"), {"ns": "all"})
    assert len(claims()) == 5
    # a list's filter form keeps its sort order and page size; its sort links keep the filters
    body = client.get(
        reverse("inventory:node-list"), {"ordering": "-name", "per_page": "2", "ready": "true"}
    ).content.decode()
    assert (
        '<input type="hidden" name="ordering" value="-name">' in body
        and '<input type="hidden" name="per_page" value="2">' in body
    )
    assert (
        '<th class="" aria-sort="descending" data-sort="name"><a href="?ordering=name&amp;per_page=2&amp;ready=true">'
        in body
    )


def test_list_pages_label_an_estimated_count_and_still_page_to_the_end(client, settings):
    load_fleet("alpha")
    client.force_login(make_user("alice"))
    settings.GPUDASH_API_EXACT_COUNT_LIMIT = 3  # above it the pages show the planner's estimate
    url = reverse("inventory:device-list")
    body = client.get(url, {"per_page": 2}).content.decode()
    assert "(estimated)" in body and "last »" not in body
    seen, page = [], 1
    while True:
        resp = client.get(url, {"per_page": 2, "page": page})
        seen += [d.id for d in resp.context["devices"]]
        if not resp.context["page_obj"].has_next():
            break
        page += 1
    assert seen == [d.id for d in client.get(url, {"per_page": 1000}).context["devices"]] and len(seen) == 13
