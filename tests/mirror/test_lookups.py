"""field__any_of (mirror/lookups.py): the same rows as __in, on PostgreSQL (one array) and SQLite
(one JSON array), for any number of values, ids and text, foreign keys included."""

import pytest

from inventory.models import Node
from mirror.models import Cluster

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]


@pytest.fixture
def nodes():
    clusters = [Cluster.objects.create(name=f"c{i}") for i in range(2)]
    Node.objects.bulk_create([Node(cluster=clusters[i % 2], name=f"n-{i:03d}", uid=f"u{i}", raw={}) for i in range(60)])
    return clusters


def test_any_of_matches_in(nodes):
    names = ["n-001", "n-007", "n-042", "missing", 'it\'s "quoted"']
    assert (
        sorted(Node.objects.filter(name__any_of=names).values_list("name", flat=True))
        == sorted(Node.objects.filter(name__in=names).values_list("name", flat=True))
        == ["n-001", "n-007", "n-042"]
    )
    ids = list(Node.objects.filter(name__in=["n-003", "n-004"]).values_list("id", flat=True))
    assert sorted(Node.objects.filter(pk__any_of=ids).values_list("name", flat=True)) == ["n-003", "n-004"]
    assert Node.objects.filter(cluster_id__any_of=[nodes[1].pk]).count() == 30  # a foreign key
    assert not Node.objects.filter(name__any_of=[]).exists()
    assert Node.objects.exclude(name__any_of=["n-000"]).count() == 59


def test_any_of_takes_more_values_than_sqlite_takes_parameters(nodes):
    many = [f"n-{i:03d}" for i in range(60)] + [f"x-{i}" for i in range(40000)]
    assert Node.objects.filter(name__any_of=many).count() == 60
    assert Node.objects.filter(name__any_of=many).delete()[0] == 60
