from django.db import migrations, models


class Migration(migrations.Migration):
    """Workers heartbeat in the database and share the leases; every change-log entry names the
    lease tenure that wrote it (the fence token)."""

    dependencies = [
        ("gpudash", "0003_kube_events"),
    ]

    operations = [
        migrations.CreateModel(
            name="SyncWorker",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "name",
                    models.CharField(
                        help_text="host:pid:random, the prefix of its lease holders", max_length=255, unique=True
                    ),
                ),
                ("hostname", models.CharField(blank=True, max_length=255)),
                ("pid", models.IntegerField(default=0)),
                (
                    "clusters",
                    models.JSONField(
                        blank=True, default=list, help_text="Names of the clusters it watches; empty = all."
                    ),
                ),
                ("started", models.DateTimeField(auto_now_add=True)),
                ("heartbeat", models.DateTimeField(db_index=True)),
                ("leases", models.IntegerField(default=0, help_text="Leases it held at its last heartbeat.")),
            ],
            options={"ordering": ("name",)},
        ),
        migrations.AddField(
            model_name="changecursor",
            name="lease_token",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="mirrorchange",
            name="holder",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AddField(
            model_name="mirrorchange",
            name="lease_token",
            field=models.BigIntegerField(default=0),
        ),
    ]
