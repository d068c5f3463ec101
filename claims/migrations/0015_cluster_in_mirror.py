"""The cluster foreign keys point at mirror.Cluster (the same table, inventory_cluster): state only."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0014_pending_newest_index"),
        ("mirror", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="allocationresult",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="auditentry",
                    name="cluster",
                    field=models.ForeignKey(
                        null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="claimconsumer",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="claimstatechange",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="finding",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="pod",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="podclaimref",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="podfootprint",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="resourceclaim",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="resourceclaimtemplate",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="stuckobservation",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
            ],
        ),
    ]
