from django.db import migrations, models


def rebuild(apps, schema_editor):
    """Left to 0010_device_kinds, which rebuilds the summary with the stored device kinds (the rebuild
    code is today's, and reads columns this migration's models do not have yet)."""


class Migration(migrations.Migration):
    """What /metrics reports: the summary also counts by device kind (whole GPU, partition, other), the
    sync state counts 410s and watch (re)connections."""

    dependencies = [
        ("inventory", "0007_perf2_summary_unique"),
    ]

    operations = [
        migrations.AddField(model_name="syncstate", name="gone_count", field=models.IntegerField(default=0)),
        migrations.AddField(model_name="syncstate", name="watch_restarts", field=models.BigIntegerField(default=0)),
        migrations.RemoveConstraint(model_name="nodedevicesummary", name="inventory_summary_unique_key"),
        migrations.AddField(
            model_name="nodedevicesummary", name="kind", field=models.CharField(default="other", max_length=16)
        ),
        migrations.RunPython(
            lambda apps, schema_editor: apps.get_model("inventory", "NodeDeviceSummary").objects.all().delete(),
            migrations.RunPython.noop,
        ),
        migrations.AddConstraint(
            model_name="nodedevicesummary",
            constraint=models.UniqueConstraint(
                fields=("cluster", "driver", "pool", "node_name", "model", "kind"), name="inventory_summary_unique_key"
            ),
        ),
        migrations.RunPython(rebuild, migrations.RunPython.noop),
    ]
