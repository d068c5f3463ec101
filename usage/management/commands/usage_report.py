"""manage.py usage_report: the usage report of the page and the API, as a table, CSV or JSON."""

import csv
import io
import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from usage import rollup
from usage.periods import KINDS
from usage.query import report_for
from usage.reports import CSV_HEADER, FILTERS, GROUPS, csv_lines, report_json


class Command(BaseCommand):
    help = (
        "GPU-hours of a period (day, week, month) by namespace, team, workload, model or node pool, the same "
        "figures as /usage/ and GET /api/v1/usage (every namespace: the command runs as an admin)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--period", choices=KINDS, default="month")
        parser.add_argument(
            "--date", default="", help="A date in the period (YYYY-MM-DD, YYYY-MM, YYYY-Www); default now."
        )
        parser.add_argument("--tz", default="", help="IANA time zone (default USAGE_TIME_ZONE).")
        parser.add_argument("--group-by", choices=list(GROUPS), default="namespace")
        parser.add_argument("--trend", type=int, default=3, help="Previous periods to compare with.")
        parser.add_argument("--limit", type=int, default=None)
        for name in (
            "cluster",
            "namespace",
            "team",
            "workload-kind",
            "workload-name",
            "model",
            "node-pool",
            "unit-rule",
        ):
            parser.add_argument(f"--{name}", default="")
        parser.add_argument("--format", choices=("table", "csv", "json"), default="table")
        parser.add_argument(
            "--roll-up",
            action="store_true",
            help="Bring the daily rollup up to date first (what beat does every 10 min).",
        )
        parser.add_argument(
            "--rebuild", action="store_true", help="With --roll-up: rebuild the rollup from the whole ledger."
        )

    def handle(self, *args, **opts):
        if opts["roll_up"]:
            done = rollup.run(rebuild=opts["rebuild"])
            self.stderr.write(f"rollup: {done or 'not kept on this database (SQLite): the ledger is read directly'}")
        params = {
            k: str(v)
            for k, v in {
                "period": opts["period"],
                "date": opts["date"],
                "tz": opts["tz"],
                "group_by": opts["group_by"],
                "trend": opts["trend"],
                "limit": opts["limit"],
                **{n: opts[n] for n in FILTERS},
            }.items()
            if v not in (None, "")
        }
        try:
            report, limit = report_for(params, None)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        if opts["format"] == "json":
            self.stdout.write(json.dumps(report_json(report, limit), indent=2))
        elif opts["format"] == "csv":
            out = io.StringIO()
            writer = csv.writer(out)
            writer.writerow(CSV_HEADER)
            writer.writerows(csv_lines(report, limit))
            self.stdout.write(out.getvalue(), ending="")
        else:
            self._table(report, limit)

    def _table(self, report, limit):
        p = report.period
        columns = GROUPS[report.group_by]
        self.stdout.write(f"{p.kind} {p.label} ({p.zone.key}, {p.hours:g} h), by {report.group_by}")
        self.stdout.write(f"{'/'.join(columns):40} {'GPU-hours':>12}  by unit rule")
        for row in report.rows[:limit]:
            name = "/".join(str(row.key[c]) for c in columns) or "(none)"
            rules = ", ".join(f"{r} {h:.2f}" for r, h in sorted(row.by_rule.items()))
            idle = f"  idle {row.idle:.2f} of {row.known:.2f}" if row.known else ""
            self.stdout.write(f"{name:40} {row.gpu_hours:12.2f}  {rules}{idle}")
        self.stdout.write(f"{'total':40} {report.total:12.2f}")
        if report.cluster_total is not None:
            self.stdout.write(f"{'cluster total':40} {report.cluster_total:12.2f}")
        for row in report.admin:
            name = "/".join(str(row.key[c]) for c in columns)
            self.stdout.write(f"admin access {name:27} {row.gpu_hours:12.2f}  device-hours")
