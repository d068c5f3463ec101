"""The move of Cluster, SyncState, the sync's own models and OpsCounter into the mirror app (state-only migrations):
a database filled by the previous release's schema migrates forward with every row intact and
reachable through the new models, its content types (and so permissions) moved with them."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sqlite_default]

# The last migration of each app before the move.
BEFORE_MOVE = [
    ("gpudash", "0006_access_profile_driver_namespaces"),
    ("inventory", "0022_vanished"),
    ("claims", "0014_pending_newest_index"),
    ("monitoring", "0003_fleet_history"),
    ("mirror", None),
    ("usage", None),  # apps newer than the move did not exist yet
    ("health", None),
]


def migrate(targets):
    """Migrate to `targets` (the other apps to their newest); the models of that state."""
    executor = MigrationExecutor(connection)
    named = {app for app, _ in targets}
    targets = [*targets, *(node for node in executor.loader.graph.leaf_nodes() if node[0] not in named)]
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([node for node in targets if node[1] is not None]).apps


def latest_targets():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_previous_release_database_migrates_forward_intact():
    old = migrate(BEFORE_MOVE)
    with pytest.raises(LookupError):
        old.get_model("mirror", "Cluster")  # really the previous release's state

    Cluster = old.get_model("inventory", "Cluster")
    SyncState = old.get_model("inventory", "SyncState")
    Pod = old.get_model("claims", "Pod")
    Node = old.get_model("inventory", "Node")
    KubeEvent = old.get_model("gpudash", "KubeEvent")
    AccessProfile = old.get_model("gpudash", "AccessProfile")
    ChangeCursor = old.get_model("gpudash", "ChangeCursor")
    PrometheusSource = old.get_model("monitoring", "PrometheusSource")
    OpsCounter = old.get_model("monitoring", "OpsCounter")
    User = old.get_model("auth", "User")
    ContentType = old.get_model("contenttypes", "ContentType")
    Permission = old.get_model("auth", "Permission")
    Group = old.get_model("auth", "Group")

    # The previous release's content type rows, with a group permission hanging off one of them.
    ContentType.objects.filter(app_label="mirror").delete()
    cluster_type, _ = ContentType.objects.get_or_create(app_label="inventory", model="cluster")
    permission, _ = Permission.objects.get_or_create(
        content_type=cluster_type, codename="view_cluster", defaults={"name": "Can view cluster"}
    )
    group = Group.objects.create(name="cluster-viewers")
    group.permissions.add(permission)

    cluster = Cluster.objects.create(name="prod", kubeconfig="/etc/kube/prod", features={"DRAPrioritizedList": True})
    SyncState.objects.create(cluster=cluster, kind="Node", status="connected", resource_version="42", object_count=3)
    Node.objects.create(cluster=cluster, uid="u-node", name="gpu-1", resource_version="7", ready=True)
    Pod.objects.create(cluster=cluster, uid="u-pod", namespace="team", name="trainer", resource_version="8")
    KubeEvent.objects.create(
        cluster=cluster,
        uid="u-ev",
        namespace="team",
        name="trainer.1",
        resource_version="9",
        involved_kind="Pod",
        involved_name="trainer",
        reason="Scheduled",
    )
    ChangeCursor.objects.create(cluster=cluster, kind="Pod", seq=5, epoch="e1")
    PrometheusSource.objects.create(cluster=cluster, url="http://prometheus:9090")
    OpsCounter.objects.create(name="detector_runs", cluster_name="prod", value=12)
    user = User.objects.create(username="ana")
    AccessProfile.objects.create(user=user, namespaces=["team"])

    migrate(latest_targets())

    from django.contrib.auth.models import Group as NewGroup
    from django.contrib.contenttypes.models import ContentType as NewContentType

    from claims.models import Pod as NewPod
    from inventory.models import Node as NewNode
    from mirror.models import AccessProfile as NewAccessProfile
    from mirror.models import ChangeCursor as NewChangeCursor
    from mirror.models import Cluster as NewCluster
    from mirror.models import KubeEvent as NewKubeEvent
    from mirror.models import OpsCounter as NewOpsCounter
    from monitoring.models import PrometheusSource as NewPrometheusSource

    moved = NewCluster.objects.get(name="prod")
    assert moved.pk == cluster.pk
    assert moved.kubeconfig == "/etc/kube/prod"
    assert moved.features == {"DRAPrioritizedList": True}
    state = moved.sync_states.get()
    assert (state.kind, state.status, state.resource_version, state.object_count) == ("Node", "connected", "42", 3)
    assert NewNode.objects.get(name="gpu-1").cluster == moved
    assert NewPod.objects.get(name="trainer").cluster == moved
    event = NewKubeEvent.objects.get(name="trainer.1")
    assert (event.cluster, event.reason) == (moved, "Scheduled")
    assert NewChangeCursor.objects.get(cluster=moved, kind="Pod").seq == 5
    assert NewPrometheusSource.objects.get(cluster=moved).url == "http://prometheus:9090"
    assert NewAccessProfile.objects.get(user__username="ana").namespaces == ["team"]
    assert moved.prometheus.url == "http://prometheus:9090"
    assert NewOpsCounter.objects.get(name="detector_runs", cluster_name="prod").value == 12

    # The content type moved (the same row), so the group keeps its permission on clusters.
    moved_type = NewContentType.objects.get_for_model(NewCluster)
    assert (moved_type.pk, moved_type.app_label) == (cluster_type.pk, "mirror")
    assert not NewContentType.objects.filter(app_label="inventory", model="cluster").exists()
    assert list(
        NewGroup.objects.get(name="cluster-viewers").permissions.values_list("content_type__app_label", "codename")
    ) == [("mirror", "view_cluster")]

    # The same tables as before the move: the schema did not change, only Django's record of it.
    tables = set(connection.introspection.table_names())
    assert {
        "inventory_cluster",
        "inventory_syncstate",
        "gpudash_kubeevent",
        "gpudash_accessprofile",
        "monitoring_opscounter",
    } <= tables
    assert not {name for name in tables if name.startswith("mirror_")}
