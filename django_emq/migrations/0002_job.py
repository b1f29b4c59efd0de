"""The ``Job`` entry of the admin: no table (``managed=False``), no permissions
of its own (the ``Lane`` permissions govern the jobs pages)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = (("django_emq", "0001_initial"),)

    operations = (
        migrations.CreateModel(
            name="Job",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "job",
                "verbose_name_plural": "jobs",
                "managed": False,
                "default_permissions": (),
            },
        ),
    )
