from django.db import migrations, models


class Migration(migrations.Migration):
    """A finding's summary as a message too, shown in the reader's language (issue 14); rows written
    before keep showing their stored English summary."""

    dependencies = [
        ("claims", "0006_pod_hami_assignment"),
    ]

    operations = [
        migrations.AddField(
            model_name="finding",
            name="summary_message",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
