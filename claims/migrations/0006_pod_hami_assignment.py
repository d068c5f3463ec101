from django.db import migrations, models


def relist_pods_and_nodes(apps, schema_editor):
    # Pods HAMi scheduled were not mirrored before, and the nodes' HAMi detail is new: the next watcher
    # start lists Pods and Nodes again instead of resuming from the stored resourceVersion.
    apps.get_model("inventory", "SyncState").objects.filter(kind__in=("Pod", "Node")).update(resource_version="")


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0005_claim_namespace_index"),
        ("inventory", "0015_nodeaccelerator_hami_detail"),
    ]

    operations = [
        migrations.AddField(
            model_name="pod",
            name="hami",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(relist_pods_and_nodes, migrations.RunPython.noop),
    ]
