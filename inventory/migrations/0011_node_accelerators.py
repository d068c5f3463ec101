import django.db.models.deletion
from django.db import migrations, models


def fill(apps, schema_editor):
    """Rows for the nodes already mirrored (the sync keeps them from now on)."""
    from inventory import accelerators

    node_model = apps.get_model("inventory", "Node")
    footprint_model = apps.get_model("claims", "PodFootprint")
    model = apps.get_model("inventory", "NodeAccelerator")
    for cluster_id in node_model.objects.values_list("cluster_id", flat=True).distinct().order_by():
        requested = {}
        for node, phase, raw in (
            footprint_model.objects.filter(cluster_id=cluster_id)
            .exclude(node_name="")
            .values_list("node_name", "phase", "raw")
            .iterator(chunk_size=2000)
        ):
            if phase in ("Succeeded", "Failed"):
                continue
            for name, value in ((raw or {}).get("requests") or {}).items():
                if isinstance(value, (int, float)) and "/" in name:
                    requested.setdefault(node, {}).setdefault(name, 0)
                    requested[node][name] += int(value)
        rows = []
        for name, raw in (
            node_model.objects.filter(cluster_id=cluster_id, namespace="")
            .values_list("name", "raw")
            .iterator(chunk_size=1000)
        ):
            for source, resource, kind, mdl, alloc, used, gpus in accelerators.rows_for_node(
                raw or {}, requested.get(name, {})
            ):
                rows.append(
                    model(
                        cluster_id=cluster_id,
                        node_name=name,
                        source=source,
                        resource=resource[:253],
                        kind=kind,
                        model=mdl,
                        allocatable=alloc,
                        requested=used,
                        gpus=gpus,
                    )
                )
        model.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):
    """Device-plugin GPUs and HAMi vGPU shares per node (inventory/accelerators.py)."""

    dependencies = [
        ("inventory", "0010_device_kinds"),
        ("claims", "0003_pod_footprint"),
    ]

    operations = [
        migrations.CreateModel(
            name="NodeAccelerator",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("node_name", models.CharField(max_length=253)),
                ("source", models.CharField(max_length=16)),
                ("resource", models.CharField(max_length=253)),
                ("kind", models.CharField(max_length=16)),
                ("model", models.TextField(blank=True)),
                ("allocatable", models.BigIntegerField(default=0)),
                ("requested", models.BigIntegerField(default=0)),
                ("gpus", models.IntegerField(default=0)),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="inventory.cluster"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["cluster", "node_name"], name="inventory_accel_node_idx")],
            },
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
