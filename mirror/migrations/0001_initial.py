"""The mirror app takes over clusters and sync state (from inventory) and the sync's own records (from
gpudash): state only, the tables keep their names (each model's db_table); the content types follow, so
permissions and admin history stay attached."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


MOVED_FROM_GPUDASH = ("accessprofile", "changecursor", "mirrorchange", "kubeevent", "syncworker")
MOVED = {"inventory": ("cluster", "syncstate"), "gpudash": MOVED_FROM_GPUDASH}


def move_content_types(apps, schema_editor, forward=True):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for old_label, names in MOVED.items():
        source, target = (old_label, "mirror") if forward else ("mirror", old_label)
        for model in names:
            if not ContentType.objects.using(db).filter(app_label=target, model=model).exists():
                ContentType.objects.using(db).filter(app_label=source, model=model).update(app_label=target)


def move_content_types_back(apps, schema_editor):
    move_content_types(apps, schema_editor, forward=False)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        # The tables exist: created by these apps' migrations before the move.
        ("gpudash", "0006_access_profile_driver_namespaces"),
        ("inventory", "0022_vanished"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Cluster",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.SlugField(max_length=63, unique=True)),
                        (
                            "kubeconfig",
                            models.CharField(blank=True, help_text="Path to a kubeconfig file.", max_length=1024),
                        ),
                        (
                            "context",
                            models.CharField(
                                blank=True, help_text="Context in the kubeconfig; empty = current.", max_length=253
                            ),
                        ),
                        (
                            "in_cluster",
                            models.BooleanField(
                                default=False, help_text="Use the pod's service account instead of a kubeconfig."
                            ),
                        ),
                        (
                            "is_snapshot",
                            models.BooleanField(
                                default=False, help_text="Imported from a dump; never watched or written to."
                            ),
                        ),
                        (
                            "read_only",
                            models.BooleanField(
                                default=False, help_text="Never write to this cluster (release actions disabled)."
                            ),
                        ),
                        ("enabled", models.BooleanField(default=True)),
                        ("features", models.JSONField(blank=True, default=dict)),
                        ("server_version", models.CharField(blank=True, max_length=64)),
                        ("served_resource_versions", models.JSONField(blank=True, default=list)),
                        ("discovered_at", models.DateTimeField(blank=True, null=True)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "inventory_cluster",
                        "ordering": ("name",),
                    },
                ),
                migrations.CreateModel(
                    name="SyncWorker",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "name",
                            models.CharField(
                                help_text="host:pid:random, the prefix of its lease holders",
                                max_length=255,
                                unique=True,
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
                    options={
                        "db_table": "gpudash_syncworker",
                        "ordering": ("name",),
                    },
                ),
                migrations.CreateModel(
                    name="AccessProfile",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "namespaces",
                            models.JSONField(
                                blank=True, default=list, help_text="Namespaces this user may see; empty = all."
                            ),
                        ),
                        (
                            "driver_namespaces",
                            models.JSONField(
                                blank=True,
                                default=list,
                                help_text="A namespace-scoped user may also see the DRA driver pods in these namespaces, and their logs (docs/auth.md).",
                            ),
                        ),
                        (
                            "user",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="access_profile",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "gpudash_accessprofile",
                    },
                ),
                migrations.CreateModel(
                    name="ChangeCursor",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("kind", models.CharField(max_length=40)),
                        ("seq", models.BigIntegerField(default=0)),
                        (
                            "pruned_through",
                            models.BigIntegerField(default=0, help_text="Log entries up to this seq were deleted."),
                        ),
                        (
                            "epoch",
                            models.CharField(
                                help_text="Random; a re-created row never passes for the old one.", max_length=32
                            ),
                        ),
                        ("lease_token", models.BigIntegerField(default=0)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "gpudash_changecursor",
                        "constraints": [
                            models.UniqueConstraint(fields=("cluster", "kind"), name="changecursor_cluster_kind")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="KubeEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("uid", models.CharField(max_length=64)),
                        ("namespace", models.CharField(blank=True, default="", max_length=253)),
                        ("name", models.CharField(max_length=253)),
                        ("resource_version", models.CharField(max_length=64)),
                        ("resource_version_num", models.BigIntegerField(default=0)),
                        ("creation_timestamp", models.DateTimeField(blank=True, null=True)),
                        ("deletion_timestamp", models.DateTimeField(blank=True, db_index=True, null=True)),
                        ("labels", models.JSONField(blank=True, default=dict)),
                        ("raw", models.JSONField(default=dict)),
                        ("synced_at", models.DateTimeField(auto_now=True)),
                        ("involved_kind", models.CharField(max_length=63)),
                        ("involved_namespace", models.CharField(blank=True, max_length=253)),
                        ("involved_name", models.CharField(max_length=253)),
                        ("involved_uid", models.CharField(blank=True, max_length=64)),
                        ("type", models.CharField(blank=True, max_length=32)),
                        ("reason", models.CharField(blank=True, max_length=128)),
                        ("message", models.TextField(blank=True)),
                        ("count", models.IntegerField(default=1)),
                        ("last_seen", models.DateTimeField(blank=True, null=True)),
                        ("reporter", models.CharField(blank=True, max_length=253)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "gpudash_kubeevent",
                        "ordering": ("cluster_id", "namespace", "name"),
                        "abstract": False,
                        "indexes": [
                            models.Index(fields=["uid"], name="gpudash_event_uid_idx"),
                            models.Index(fields=["namespace"], name="gpudash_event_namespace_idx"),
                            models.Index(
                                fields=["cluster", "involved_kind", "involved_namespace", "involved_name"],
                                name="gpudash_event_involved_idx",
                            ),
                            models.Index(fields=["cluster", "last_seen"], name="gpudash_event_age_idx"),
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("cluster", "namespace", "name"), name="gpudash_kubeevent_unique_name"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="MirrorChange",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("kind", models.CharField(max_length=40)),
                        ("seq", models.BigIntegerField()),
                        ("keys", models.JSONField(default=list, help_text="[[namespace, name], ...]")),
                        ("at", models.DateTimeField(auto_now_add=True)),
                        ("holder", models.CharField(blank=True, default="", max_length=255)),
                        ("lease_token", models.BigIntegerField(default=0)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="mirror.cluster"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "gpudash_mirrorchange",
                        "indexes": [models.Index(fields=["cluster", "kind", "seq"], name="mirrorchange_cursor")],
                    },
                ),
                migrations.CreateModel(
                    name="SyncState",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("kind", models.CharField(max_length=64)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("idle", "Idle"),
                                    ("listing", "Listing"),
                                    ("connected", "Connected"),
                                    ("error", "Error"),
                                    ("not_served", "Not served"),
                                    ("snapshot", "Snapshot"),
                                ],
                                default="idle",
                                max_length=16,
                            ),
                        ),
                        ("api_version", models.CharField(blank=True, max_length=64)),
                        ("resource_version", models.CharField(blank=True, max_length=64)),
                        ("last_error", models.TextField(blank=True)),
                        ("last_error_at", models.DateTimeField(blank=True, null=True)),
                        ("last_event_at", models.DateTimeField(blank=True, null=True)),
                        ("last_list_at", models.DateTimeField(blank=True, null=True)),
                        ("connected_since", models.DateTimeField(blank=True, null=True)),
                        ("object_count", models.IntegerField(default=0)),
                        ("events_applied", models.BigIntegerField(default=0)),
                        ("malformed_count", models.IntegerField(default=0)),
                        ("last_malformed", models.TextField(blank=True)),
                        ("last_malformed_at", models.DateTimeField(blank=True, null=True)),
                        ("relist_count", models.IntegerField(default=0)),
                        ("gone_count", models.IntegerField(default=0)),
                        ("watch_restarts", models.BigIntegerField(default=0)),
                        ("lease_holder", models.CharField(blank=True, max_length=255)),
                        ("lease_expires", models.DateTimeField(blank=True, null=True)),
                        ("updated", models.DateTimeField(auto_now=True)),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="sync_states",
                                to="mirror.cluster",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "inventory_syncstate",
                        "ordering": ("cluster__name", "kind"),
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("cluster", "kind"), name="inventory_syncstate_unique_cluster_kind"
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
