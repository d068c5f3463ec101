"""Cluster and SyncState moved to the mirror app (mirror/migrations/0001); the cluster foreign keys point
there. State only: the tables keep their names."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0022_vanished"),
        ("mirror", "0001_initial"),
        # Every other foreign key to inventory.Cluster points at mirror.Cluster before the model goes.
        ("claims", "0015_cluster_in_mirror"),
        ("monitoring", "0004_cluster_in_mirror"),
        ("gpudash", "0007_models_to_mirror"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="nodeaccelerator",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="vanished",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="device",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="sharedcounterset",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="nodedevicesummary",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="devicetaintrule",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="node",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="resourceslice",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="deviceclass",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="namespace",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.DeleteModel(
                    name="SyncState",
                ),
                migrations.DeleteModel(
                    name="Cluster",
                ),
            ],
        ),
    ]
