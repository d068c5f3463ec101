from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0014_slice_device_count"),
    ]

    operations = [
        migrations.AddField(
            model_name="nodeaccelerator",
            name="detail",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
