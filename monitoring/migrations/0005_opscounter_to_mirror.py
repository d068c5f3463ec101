"""OpsCounter moved to the mirror app (mirror/migrations/0002): state only, the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0004_cluster_in_mirror"),
        ("mirror", "0002_opscounter_from_monitoring"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name="OpsCounter",
                ),
            ],
        ),
    ]
