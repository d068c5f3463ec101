"""OpsCounter moves from monitoring to the mirror app (any app counts its runs in it): state only, the
table keeps its name; its content type follows."""

from django.db import migrations, models


def move_content_type(apps, schema_editor, source="monitoring", target="mirror"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.using(schema_editor.connection.alias)
    if not types.filter(app_label=target, model="opscounter").exists():
        types.filter(app_label=source, model="opscounter").update(app_label=target)


def move_content_type_back(apps, schema_editor):
    move_content_type(apps, schema_editor, source="mirror", target="monitoring")


class Migration(migrations.Migration):
    dependencies = [
        ("mirror", "0001_initial"),
        ("monitoring", "0004_cluster_in_mirror"),  # the table exists (monitoring 0001)
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="OpsCounter",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=64)),
                        ("cluster_name", models.CharField(blank=True, max_length=63)),
                        ("label", models.CharField(blank=True, max_length=128)),
                        ("value", models.BigIntegerField(default=0)),
                    ],
                    options={
                        "db_table": "monitoring_opscounter",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("name", "cluster_name", "label"), name="monitoring_counter_unique"
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
