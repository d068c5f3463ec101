"""Texts that are written now and read later, in the reader's language (issue 14).

The stuck-claim detector stores each finding's summary in the database; who reads it, and in which
language, is only known when a page shows it. So a rule builds a message, {"msgid": English text
with named placeholders, "params": {...}}, stores both the message and its English rendering (the
API and older clients read the English `summary`), and the page renders the message again through
gettext. A parameter may itself be a message (one clause of a longer sentence), rendered the same way,
or a list of messages and plain texts (clauses joined with the language's "; ").
Msgids are marked with gettext_noop where they are written, so `make messages` finds them.
"""

from django.utils.formats import number_format
from django.utils.translation import gettext, pgettext


def message(msgid, **params):
    return {"msgid": msgid, "params": params}


def render(msg, fallback="", translate=True):
    """The message's text, translated to the active language (English with translate=False).

    A message that does not render (an older row, a translation whose placeholders do not match)
    gives `fallback`: a page never fails on a stored text.
    """
    if not isinstance(msg, dict) or not msg.get("msgid"):
        return fallback
    params = {k: _param(v, translate) for k, v in (msg.get("params") or {}).items()}
    try:
        return (gettext(msg["msgid"]) if translate else msg["msgid"]) % params
    except (KeyError, TypeError, ValueError):
        return fallback or msg["msgid"]


def grouped(n):
    """A count as the active language writes it, with its thousands grouped ("12,400"): for counts put
    into a sentence in Python (a template uses humanize's intcomma)."""
    return number_format(n, force_grouping=True)


def english(msg, fallback=""):
    """The message in English: what the API and the stored English text say."""
    return render(msg, fallback, translate=False)


def _param(value, translate):
    if isinstance(value, dict):
        return render(value, str(value), translate)
    if isinstance(value, list):
        sep = pgettext("between clauses of a list", "; ") if translate else "; "
        return sep.join(_param(v, translate) for v in value)
    return value


def duration(seconds):
    """A duration with the precision it deserves and its unit in the active language: "0.3 ms",
    "12 ms", "4.2 s", "3 min 12 s" (never "0.0 s" for a sub-second time)."""
    if seconds is None:
        return ""
    seconds = max(float(seconds), 0.0)
    if seconds < 1:
        ms = seconds * 1000
        return gettext("%(n)s ms") % {"n": number_format(ms, 2 if ms < 0.1 else 1 if ms < 10 else 0)}
    if seconds < 60:
        return gettext("%(n)s s") % {"n": number_format(seconds, 1 if seconds < 10 else 0)}
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return gettext("%(m)s min %(s)s s") % {"m": minutes, "s": rest}
    hours, minutes = divmod(minutes, 60)
    return gettext("%(h)s h %(m)s min") % {"h": grouped(hours), "m": minutes}
