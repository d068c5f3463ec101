from django.db import migrations, models


def rebuild(apps, schema_editor):
    from django.db.models import Q

    from inventory import summary

    summary.rebuild(Q(), apps.get_model("inventory", "Device"), apps.get_model("inventory", "NodeDeviceSummary"))


class Migration(migrations.Migration):
    """Partition-aware capacity on the per-node summary (dra/partitions.py): per MIG profile what can
    still be created, and whole GPUs stranded by partitions in use; the summary is rebuilt with them."""

    dependencies = [
        ("inventory", "0023_cluster_in_mirror"),
    ]

    operations = [
        migrations.AddField(
            model_name="nodedevicesummary", name="partition_free", field=models.JSONField(blank=True, default=dict)
        ),
        migrations.AddField(
            model_name="nodedevicesummary", name="n_gpus_stranded", field=models.IntegerField(default=0)
        ),
        migrations.RunPython(rebuild, migrations.RunPython.noop),
    ]
