import django.db.models.deletion
from django.db import migrations, models


def classify_and_rebuild(apps, schema_editor):
    """Kinds for the stored devices (from their slices' raw devices); 0012 rebuilds the summary (the
    rebuild code is today's and reads columns added there)."""
    from inventory import devicekinds

    device_model = apps.get_model("inventory", "Device")
    slice_model = apps.get_model("inventory", "ResourceSlice")
    for slice_id, driver, raw in slice_model.objects.values_list("id", "driver", "raw").iterator(chunk_size=500):
        devices = ((raw or {}).get("spec") or {}).get("devices") or []
        by_name = {}
        for dev, (kind, parent) in zip(devices, devicekinds.classify(driver, devices)):
            if isinstance(dev, dict):
                by_name[dev.get("name") or ""] = (kind, parent)
        rows = list(device_model.objects.filter(slice_id=slice_id).only("id", "name"))
        for row in rows:
            row.kind, row.parent = by_name.get(row.name, (devicekinds.OTHER, ""))
        device_model.objects.bulk_update(rows, ["kind", "parent"], batch_size=1000)


class Migration(migrations.Migration):
    """Device kinds (whole GPU, partition, other) stored per device with the physical GPU it belongs to;
    physical-GPU counts in the per-node summary; what pools last published while they publish nothing."""

    dependencies = [
        ("inventory", "0009_syncstate_last_malformed"),
    ]

    operations = [
        migrations.AddField(model_name="device", name="kind", field=models.CharField(default="other", max_length=16)),
        migrations.AddField(model_name="device", name="parent", field=models.CharField(blank=True, max_length=253)),
        migrations.AddField(model_name="nodedevicesummary", name="n_gpus", field=models.IntegerField(default=0)),
        migrations.AddField(model_name="nodedevicesummary", name="n_gpus_free", field=models.IntegerField(default=0)),
        migrations.CreateModel(
            name="UnpublishedDevices",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("driver", models.CharField(max_length=63)),
                ("pool", models.CharField(max_length=253)),
                ("node_name", models.CharField(blank=True, max_length=253)),
                ("model", models.TextField(blank=True)),
                ("kind", models.CharField(default="other", max_length=16)),
                ("map_key", models.CharField(max_length=260)),
                ("sort_key", models.TextField()),
                ("n_total", models.IntegerField(default=0)),
                ("n_gpus", models.IntegerField(default=0)),
                ("since", models.DateTimeField()),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="inventory.cluster"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("cluster", "driver", "pool", "node_name", "model", "kind"),
                        name="inventory_unpublished_unique_key",
                    ),
                ],
            },
        ),
        migrations.RunPython(classify_and_rebuild, migrations.RunPython.noop),
    ]
