from django.db import migrations, models


class Migration(migrations.Migration):
    """An audit entry's reason as a message too, shown in the reader's language (issue 14); rows
    written before keep showing their stored English reason."""

    dependencies = [
        ("claims", "0007_finding_summary_message"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="reason_message",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
