from django.db import migrations, models


def rebuild(apps, schema_editor):
    from django.db.models import Q

    from inventory import summary

    summary.rebuild(Q(), apps.get_model("inventory", "Device"), apps.get_model("inventory", "NodeDeviceSummary"))


class Migration(migrations.Migration):
    """What a pool last published while it publishes nothing is kept on placeholder summary rows
    (n_unpublished, unpublished_since) instead of a table of its own; the summary is rebuilt with the
    physical-GPU counts of 0010."""

    dependencies = [
        ("inventory", "0011_node_accelerators"),
    ]

    operations = [
        migrations.DeleteModel(name="UnpublishedDevices"),
        migrations.AddField(model_name="nodedevicesummary", name="n_unpublished", field=models.IntegerField(default=0)),
        migrations.AddField(
            model_name="nodedevicesummary", name="unpublished_since", field=models.DateTimeField(blank=True, null=True)
        ),
        migrations.RunPython(rebuild, migrations.RunPython.noop),
    ]
