import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("gpudash", "0001_initial"),
        ("inventory", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="ChangeCursor",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=40)),
                ("seq", models.BigIntegerField(default=0)),
                (
                    "pruned_through",
                    models.BigIntegerField(default=0, help_text="Log entries up to this seq were deleted."),
                ),
                (
                    "epoch",
                    models.CharField(help_text="Random; a re-created row never passes for the old one.", max_length=32),
                ),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="inventory.cluster"
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("cluster", "kind"), name="changecursor_cluster_kind")]
            },
        ),
        migrations.CreateModel(
            name="MirrorChange",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=40)),
                ("seq", models.BigIntegerField()),
                ("keys", models.JSONField(default=list, help_text="[[namespace, name], ...]")),
                ("at", models.DateTimeField(auto_now_add=True)),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="inventory.cluster"
                    ),
                ),
            ],
            options={"indexes": [models.Index(fields=["cluster", "kind", "seq"], name="mirrorchange_cursor")]},
        ),
    ]
