"""The bench fleet in PostgreSQL, shared by the scripts that measure on bench_api's 5,000-node fleet.

One way to name the database, set Django up on it and load the fleet only when it is missing, so
bench_history.py and bench_metrics.py (which share one database) do not each carry a copy.
"""

import os


def add_fleet_arguments(parser):
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument(
        "--reload", action="store_true", help="Reload the fleet even if the database has one of --nodes nodes."
    )


def open_fleet(args, default_db, **env):
    """Point Django at BENCH_DATABASE_URL (or default_db), migrate, and load the fleet if it is not there.

    `env` is set before Django reads its settings (e.g. a history retention the run needs)."""
    db_url = os.environ.get("BENCH_DATABASE_URL", default_db)
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    os.environ.setdefault("DB_CONN_MAX_AGE", "600")
    os.environ.update(env)
    from bench_api import ensure_database, load

    ensure_database(db_url)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    from inventory.models import Device
    from mirror.models import Cluster

    if args.reload or Device.objects.filter(cluster__name="bench").count() < args.nodes * 8:
        load(args.nodes, args.claims)
    return Cluster.objects.get(name="bench")


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])
