"""Sortable list pages: sorting by each column gives the rows of the unsorted page in the order a sort
done here on the same rows gives (Django test client, the HTML parsed); the columns alternate between
ascending and descending, so every list is checked both ways without every column's page twice.

The fleet: the UI tests' hand-made cluster "alpha" plus the demo scenario as cluster "demo", so every
column has ties, distinct values and empty cells; every list fits on one page, so "the same rows"
is the whole list.
"""

import datetime
import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from claims.models import Pod, ResourceClaim
from dra.quantity import parse_quantity
from inventory.models import Device, DeviceClass, Node
from mirror.models import Cluster
from tests.fleet_data import load_scenario
from tests.ui_fixtures import load_fleet, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]


class TableParser(HTMLParser):
    """The table with id `table_id`: its header cells' data-sort names and each row's cell texts
    (the text of a cell's first badge apart, as `badge`)."""

    def __init__(self, table_id):
        super().__init__(convert_charrefs=True)
        self.table_id, self.inside, self.depth = table_id, False, 0
        self.headers, self.rows = [], []
        self.cell = None
        self.in_badge = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == self.table_id:
            self.inside = True
        if not self.inside:
            return
        if tag == "tr":
            self.row = []
        elif tag in ("th", "td"):
            self.cell = {"text": "", "badge": None, "sort": attrs.get("data-sort")}
        elif (
            tag == "span"
            and self.cell is not None
            and "badge" in (attrs.get("class") or "").split()
            and self.cell["badge"] is None
        ):
            self.in_badge, self.cell["badge"] = 1, ""
        elif tag == "span" and self.in_badge:
            self.in_badge += 1

    def handle_endtag(self, tag):
        if not self.inside:
            return
        if tag == "span" and self.in_badge:
            self.in_badge -= 1
        elif tag == "th" and self.cell is not None:
            self.headers.append(self.cell["sort"])
            self.cell = None
        elif tag == "td" and self.cell is not None:
            self.row.append({"text": " ".join(self.cell["text"].split()), "badge": (self.cell["badge"] or "").strip()})
            self.cell = None
        elif tag == "tr" and getattr(self, "row", None):
            self.rows.append(self.row)
            self.row = []
        elif tag == "table":
            self.inside = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell["text"] += data
            if self.in_badge:
                self.cell["badge"] += data


def table(client, url, table_id):
    resp = client.get(url)
    assert resp.status_code == 200, url
    body = resp.content.decode()
    assert 'id="sort-error"' not in body, url
    parser = TableParser(table_id)
    parser.feed(body)
    assert parser.rows, f"no rows in #{table_id} of {url}"
    return parser.headers, [dict(zip(parser.headers, row)) for row in parser.rows]


def check_every_column(client, path, table_id, identity, values, skip=()):
    """For every sortable column (header data-sort), ascending and descending by turns: the sorted page
    has the same rows as the unsorted page, in the order of a stable sort here by `values[column](row)`
    (None last)."""
    headers, unsorted = table(client, path, table_id)
    columns = [h for h in headers if h]
    assert set(columns) - set(skip) == set(values), f"sortable columns of {path}: {columns}"
    ids = sorted(identity(r) for r in unsorted)
    assert len(set(ids)) == len(ids) > 3
    checked = []
    for column in columns:
        if column in skip:
            continue
        key = values[column]
        # One direction per column (a page each costs the whole list's queries); both over the list.
        desc = len(checked) % 2 == 1
        _, rows = table(client, f"{path}?ordering={'-' if desc else ''}{column}", table_id)
        assert sorted(identity(r) for r in rows) == ids, (column, desc)
        got = [key(r) for r in rows]
        present = sorted((v for v in (key(r) for r in unsorted) if v is not None), reverse=desc)
        expected = present + [None] * (len(got) - len(present))
        assert got == expected, (column, desc)
        # A sort that changes nothing would pass the line above on already-ordered data: the
        # fleet is chosen so every column has at least two distinct values.
        assert len(set(map(repr, got))) > 1, column
        checked.append(desc)
    assert len(checked) == len(values) and set(checked) == {False, True}


@pytest.fixture
def viewer(client):
    from tests.fleet_data import apply_all
    from tests.ui_fixtures import gpu, resource_slice

    alpha = load_fleet("alpha")
    load_scenario(Cluster.objects.create(name="demo"))
    # A pool at generation 3 that publishes one of its two slices: a generation and a problem to sort by.
    extra = resource_slice("node-d", [gpu("gpu-0", "NVIDIA L4", memory="24Gi")])
    extra["spec"]["pool"].update(generation=3, resourceSliceCount=2)
    apply_all(alpha, [("ResourceSlice", extra)])
    client.force_login(make_user("alice"))
    client.get("/?cluster=all")
    return client


def text(column):
    return lambda r: r[column]["text"] or None


def number(column):
    return lambda r: int(r[column]["text"])


def check_nodes(viewer):
    nodes = {
        (c, n): (ready, since)
        for c, n, ready, since in Node.objects.values_list("cluster__name", "name", "ready", "ready_changed_at")
    }
    ident = lambda r: (r["cluster"]["text"], r["name"]["text"].replace(" cordoned", ""))  # noqa: E731
    check_every_column(
        viewer,
        reverse("inventory:node-list"),
        "node-table",
        ident,
        {
            "cluster": text("cluster"),
            "name": lambda r: ident(r)[1],
            "ready": lambda r: nodes[ident(r)][0],
            "since": lambda r: nodes[ident(r)][1],
            "devices": number("devices"),
            "free": number("free"),
            "allocated": number("allocated"),
            "gpus": lambda r: int(r["gpus"]["text"] or 0),
            "free_gpus": lambda r: int(r["free_gpus"]["text"] or 0),  # blank: none
        },
    )


def check_devices(viewer):
    held = {
        (c, d, p, n): f"{ns}/{h}"
        for c, d, p, n, ns, h in Device.objects.values_list(
            "cluster__name", "driver", "pool", "name", "held_by_namespace", "held_by_name"
        )
    }
    ident = lambda r: (r["cluster"]["text"], r["driver"]["text"], r["pool"]["text"], r["name"]["text"])  # noqa: E731
    check_every_column(
        viewer,
        reverse("inventory:device-list"),
        "device-table",
        ident,
        {
            "cluster": text("cluster"),
            "node": lambda r: r["node"]["text"].replace("—", ""),  # "" without a node: first, as in SQL
            "name": text("name"),
            "driver": text("driver"),
            "pool": text("pool"),
            "model": lambda r: r["model"]["text"],  # "" for devices without one: sorted first, as in SQL
            "memory": lambda r: parse_quantity(r["memory"]["text"]) if r["memory"]["text"] else None,
            "state": lambda r: r["state"]["badge"],
            "holder": lambda r: held[ident(r)],
        },
    )


def check_pods(viewer):
    ident = lambda r: (r["cluster"]["text"], r["namespace"]["text"], r["name"]["text"])  # noqa: E731
    check_every_column(
        viewer,
        reverse("claims:pod-list"),
        "pod-table",
        ident,
        {
            "cluster": text("cluster"),
            "namespace": text("namespace"),
            "name": text("name"),
            "phase": lambda r: r["phase"]["badge"].replace("?", ""),
            "node": lambda r: r["node"]["text"],
        },
    )


def check_pools(viewer):
    ident = lambda r: (r["cluster"]["text"], r["driver"]["text"], r["pool"]["text"])  # noqa: E731
    check_every_column(
        viewer,
        reverse("inventory:pool-list"),
        "pool-table",
        ident,
        {
            "cluster": text("cluster"),
            "driver": text("driver"),
            "pool": text("pool"),
            "generation": number("generation"),
            "slices": lambda r: int(r["slices"]["text"].split("/")[0]),
            "devices": number("devices"),
            "nodes": lambda r: None if r["nodes"]["text"] == "—" else r["nodes"]["text"],
            "problems": lambda r: (
                0 if r["problems"]["text"] == "consistent" else len(r["problems"]["text"].split("  "))
            ),
        },
    )


def check_classes(viewer):
    from inventory.tasks import count_class_matches

    for cluster in Cluster.objects.all():
        count_class_matches(cluster.id)  # what the background recount stores
    ident = lambda r: (r["cluster"]["text"], r["name"]["text"])  # noqa: E731
    matches = {(c, n): m for c, n, m in DeviceClass.objects.values_list("cluster__name", "name", "match_count")}
    check_every_column(
        viewer,
        reverse("inventory:class-list"),
        "class-table",
        ident,
        {
            "cluster": text("cluster"),
            "name": text("name"),
            "extended": lambda r: r["extended"]["text"].replace("—", ""),  # "" without one: first, as in SQL
            "matching": lambda r: matches[ident(r)],
        },
    )


def check_claims(viewer):
    created = {
        (c, ns, n): t
        for c, ns, n, t in ResourceClaim.objects.values_list("cluster__name", "namespace", "name", "creation_timestamp")
    }
    ident = lambda r: (r["cluster"]["text"], r["namespace"]["text"], r["name"]["text"])  # noqa: E731
    check_every_column(
        viewer,
        reverse("claims:claim-list"),
        "claim-table",
        ident,
        {
            "cluster": text("cluster"),
            "namespace": text("namespace"),
            "name": text("name"),
            "state": lambda r: r["state"]["badge"],
            "node": lambda r: r["node"]["text"],
            "classes": lambda r: r["classes"]["text"].split(", ")[0] or None,
            "owner": lambda r: r["owner"]["text"],
            "created": lambda r: created[ident(r)],
        },
    )


def check_findings(viewer):
    from claims.models import Finding

    # Findings of several rules, severities and remedies, one without a claim, at distinct times
    # (beside the fixture's one in cluster alpha).
    now = datetime.datetime.now(datetime.UTC)
    demo = Cluster.objects.get(name="demo")
    for i, (rule, severity, remedy, claim_name) in enumerate(
        [
            ("stale_reservation", "warning", "remove_reservations", "train-a"),
            ("orphaned_allocation", "critical", "deallocate", "orphan"),
            ("node_gone", "info", "", "b-claim"),
            ("double_allocation", "critical", "", ""),
        ]
    ):
        Finding.objects.create(
            cluster=demo,
            rule=rule,
            severity=severity,
            remedy=remedy,
            namespace="team-a" if claim_name else "",
            claim_name=claim_name,
            claim_uid=f"uid-sort-{i}",
            summary=f"finding {i}",
            first_seen=now - datetime.timedelta(minutes=7 * i + 3),
            last_seen=now,
        )
    seen = {
        (f.cluster.name, f"{f.namespace}/{f.claim_name}" if f.claim_name else "", f.rule): f.first_seen
        for f in Finding.objects.active().select_related("cluster")
    }
    rule_keys = {}
    from claims.stuck import RULE_TITLES

    for key, title in RULE_TITLES.items():
        rule_keys[str(title)] = key
    ident = lambda r: (r["cluster"]["text"], r["claim"]["text"], rule_keys.get(r["rule"]["text"], r["rule"]["text"]))  # noqa: E731
    check_every_column(
        viewer,
        reverse("ops:stuck"),
        "findings-table",
        ident,
        {
            "severity": lambda r: {"info": 1, "warning": 2, "critical": 3}[r["severity"]["badge"]],
            "rule": text("rule"),
            "cluster": text("cluster"),
            "claim": text("claim"),
            "first_seen": lambda r: seen[ident(r)],
            "remedy": lambda r: None if r["remedy"]["text"] == "investigate" else r["remedy"]["text"],
        },
    )


def check_pending(viewer):
    from tests.fleet_data import apply_all
    from tests.ui_fixtures import pod

    # Pending pods with distinct ages and scheduler reasons (one without a condition yet).
    demo = Cluster.objects.get(name="demo")
    pods = []
    for i, (name, message) in enumerate(
        [("zeta-pod", "0/3 nodes are available"), ("alpha-pod", ""), ("mid-pod", "no GPU left")]
    ):
        raw = pod("team-c", name, f"{name}-claim", phase="Pending", unschedulable_message=message)
        raw["metadata"]["creationTimestamp"] = f"2026-02-0{i + 1}T08:00:00Z"
        if name == "mid-pod":
            raw["status"]["conditions"][0]["reason"] = "SchedulerError"
        pods.append(("Pod", raw))
    apply_all(demo, pods)
    created = {
        (c, ns, n): t
        for c, ns, n, t in Pod.objects.values_list("cluster__name", "namespace", "name", "creation_timestamp")
    }
    ident = lambda r: (r["cluster"]["text"], r["namespace"]["text"], r["name"]["text"])  # noqa: E731
    check_every_column(
        viewer,
        reverse("ops:pending"),
        "pending-table",
        ident,
        {
            "cluster": text("cluster"),
            "namespace": text("namespace"),
            "name": text("name"),
            "created": lambda r: created[ident(r)],
            "reason": text("reason"),
        },
    )


MAP_ROW = re.compile(
    r'<div class="maprow[^"]*" id="[^"]*" data-cluster="([^"]*)" data-node="([^"]*)" data-gpus="(\d+)" data-gpus-free="(\d+)" data-devices="(\d+)"'
)


def check_map(viewer):
    """The fleet map's rows are not a table: its sort links, each column one way (descending for
    the counts, where the natural order would be the default anyway) and the name both ways."""
    path = reverse("inventory:fleet-map")

    def rows(url):
        body = viewer.get(url).content.decode()
        assert 'id="sort-error"' not in body, url
        return body, [
            {"cluster": c, "node": n, "gpus": int(g), "free_gpus": int(f), "devices": int(d)}
            for c, n, g, f, d in MAP_ROW.findall(body)
        ]

    body, unsorted = rows(path)
    links = re.search(r'<p class="mapsort" id="map-sort">(.*?)</p>', body, re.S).group(1)
    columns = re.findall(r'data-sort="([^"]+)"', links)
    natural = lambda r: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", r["node"])]  # noqa: E731
    keys = {
        "cluster": lambda r: r["cluster"],
        "node": natural,
        "gpus": lambda r: r["gpus"],
        "free_gpus": lambda r: r["free_gpus"],
        "devices": lambda r: r["devices"],
    }
    assert sorted(columns) == sorted(keys)
    ids = sorted((r["cluster"], r["node"]) for r in unsorted)
    assert len(set(ids)) == len(ids) > 3
    for column, desc in [(c, c != "node") for c in columns] + [("node", True), ("free_gpus", False)]:
        _, got = rows(f"{path}?ordering={'-' if desc else ''}{column}")
        assert sorted((r["cluster"], r["node"]) for r in got) == ids, (column, desc)
        values = [keys[column](r) for r in got]
        assert values == sorted(values, reverse=desc) and len(set(map(repr, values))) > 1, (column, desc, values)


LISTS = [
    check_nodes,
    check_devices,
    check_pods,
    check_pools,
    check_classes,
    check_claims,
    check_findings,
    check_pending,
    check_map,
]


def test_every_list_sorts_by_every_column(viewer):
    # One test over every list: loading the two fleets costs more than all the checks.
    for check in LISTS:
        check(viewer)
