"""The ``Lane`` entry of the admin: no table (``managed=False``), only permissions."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = ()

    operations = (
        migrations.CreateModel(
            name="Lane",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "lane",
                "verbose_name_plural": "lanes",
                "permissions": (
                    ("view_lanes", "Can view lanes, their jobs and the workers"),
                    (
                        "manage_lanes",
                        "Can pause, drain and tune lanes and retry or delete dead jobs",
                    ),
                ),
                "managed": False,
                "default_permissions": (),
            },
        ),
    )
