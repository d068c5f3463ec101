from django.db import migrations, models


class Migration(migrations.Migration):
    """The reason the watcher last skipped a malformed object, kept for the readiness page."""

    dependencies = [
        ("inventory", "0008_metrics_columns"),
    ]

    operations = [
        migrations.AddField(model_name="syncstate", name="last_malformed", field=models.TextField(blank=True)),
        migrations.AddField(
            model_name="syncstate", name="last_malformed_at", field=models.DateTimeField(blank=True, null=True)
        ),
    ]
