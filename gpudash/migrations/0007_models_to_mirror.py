"""gpudash's models moved to the mirror app (mirror/migrations/0001): state only, the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("gpudash", "0006_access_profile_driver_namespaces"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="accessprofile",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="changecursor",
                    name="cluster",
                ),
                migrations.RemoveField(
                    model_name="kubeevent",
                    name="cluster",
                ),
                migrations.RemoveField(
                    model_name="mirrorchange",
                    name="cluster",
                ),
                migrations.DeleteModel(
                    name="SyncWorker",
                ),
                migrations.DeleteModel(
                    name="AccessProfile",
                ),
                migrations.DeleteModel(
                    name="ChangeCursor",
                ),
                migrations.DeleteModel(
                    name="KubeEvent",
                ),
                migrations.DeleteModel(
                    name="MirrorChange",
                ),
            ],
        ),
    ]
