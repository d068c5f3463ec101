from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0003_pod_footprint"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="kube_identity",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
