"""Report periods: a calendar day, ISO week (Monday first) or month in the reports' time zone
(setting USAGE_TIME_ZONE, default TIME_ZONE), as a half-open span [start, end) of aware datetimes.

Local midnight to local midnight: a day is 23 or 25 hours long across a DST change, and the period's
GPU-hours are counted over exactly that span (no hour is counted twice or lost).
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings

KINDS = ("day", "week", "month")


def report_zone(name=None):
    """The ZoneInfo of `name`, else of USAGE_TIME_ZONE (default TIME_ZONE); ValueError for an unknown name."""
    name = name or getattr(settings, "USAGE_TIME_ZONE", "") or settings.TIME_ZONE or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"Unknown time zone {name!r}; use an IANA name such as Europe/Berlin.") from exc


def local_midnight(day, zone):
    """The first instant of local date `day` (a midnight skipped by a DST change maps to the hour after),
    in UTC: Python subtracts and compares two datetimes of one tzinfo by their wall clocks, which
    would make a DST day 24 hours long."""
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)


@dataclass(frozen=True)
class Period:
    kind: str
    first_day: date  # local date the period starts on
    zone: ZoneInfo

    @property
    def end_day(self):
        """The local date after the period's last day."""
        d = self.first_day
        if self.kind == "day":
            return d + timedelta(days=1)
        if self.kind == "week":
            return d + timedelta(days=7)
        return date(d.year + (d.month == 12), d.month % 12 + 1, 1)

    @property
    def start(self):
        return local_midnight(self.first_day, self.zone)

    @property
    def end(self):
        return local_midnight(self.end_day, self.zone)

    @property
    def label(self):
        if self.kind == "day":
            return self.first_day.isoformat()
        if self.kind == "week":
            year, week, _ = self.first_day.isocalendar()
            return f"{year}-W{week:02d}"
        return self.first_day.strftime("%Y-%m")

    @property
    def hours(self):
        return (self.end - self.start).total_seconds() / 3600

    def previous(self):
        if self.kind == "day":
            return Period("day", self.first_day - timedelta(days=1), self.zone)
        if self.kind == "week":
            return Period("week", self.first_day - timedelta(days=7), self.zone)
        d = self.first_day - timedelta(days=1)
        return Period("month", d.replace(day=1), self.zone)

    def days(self):
        d = self.first_day
        while d < self.end_day:
            yield d
            d += timedelta(days=1)


def period_containing(kind, day, zone):
    """The `kind` period (day, week, month) that local date `day` falls in."""
    if kind not in KINDS:
        raise ValueError(f"Unknown period {kind!r}; use one of: {', '.join(KINDS)}.")
    if kind == "week":
        day = day - timedelta(days=day.weekday())
    elif kind == "month":
        day = day.replace(day=1)
    return Period(kind, day, zone)


def parse_period(kind, text, zone, now):
    """The period named by `text`: a date in it (YYYY-MM-DD), YYYY-MM for a month, YYYY-Www for a week;
    empty: the one containing `now`. ValueError with a readable message otherwise."""
    text = (text or "").strip()
    if not text:
        return period_containing(kind, now.astimezone(zone).date(), zone)
    try:
        if kind == "month" and len(text) == 7:
            day = date.fromisoformat(text + "-01")
        elif kind == "week" and "W" in text.upper():
            year, week = text.upper().split("-W")
            day = date.fromisocalendar(int(year), int(week), 1)
        else:
            day = date.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(
            f"Cannot read {text!r} as a {kind}; use YYYY-MM-DD (a date in the period)"
            + (", or YYYY-MM" if kind == "month" else ", or YYYY-Www" if kind == "week" else "")
            + "."
        ) from exc
    return period_containing(kind, day, zone)
