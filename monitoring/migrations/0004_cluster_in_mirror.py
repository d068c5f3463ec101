"""The cluster foreign keys point at mirror.Cluster (the same table, inventory_cluster): state only."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mirror", "0001_initial"),
        ("monitoring", "0003_fleet_history"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="fleetsample",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="namespacesample",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="prometheussource",
                    name="cluster",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="prometheus", to="mirror.cluster"
                    ),
                ),
                migrations.AlterField(
                    model_name="utilizationsample",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                    ),
                ),
            ],
        ),
    ]
