"""Texts that are written now and read later, in the reader's language (issue 14).

The stuck-claim detector stores each finding's summary in the database; who reads it, and in which
language, is only known when a page shows it. So a rule builds a message, {"msgid": English text
with named placeholders, "params": {...}}, stores both the message and its English rendering (the
API and older clients read the English `summary`), and the page renders the message again through
gettext. A parameter may itself be a message (one clause of a longer sentence), rendered the same way.
Msgids are marked with gettext_noop where they are written, so `make messages` finds them.
"""

from django.utils.translation import gettext


def message(msgid, **params):
    return {"msgid": msgid, "params": params}


def render(msg, fallback="", translate=True):
    """The message's text, translated to the active language (English with translate=False).

    A message that does not render (an older row, a translation whose placeholders do not match)
    gives `fallback`: a page never fails on a stored text.
    """
    if not isinstance(msg, dict) or not msg.get("msgid"):
        return fallback
    params = {k: render(v, str(v), translate) if isinstance(v, dict) else v for k, v in (msg.get("params") or {}).items()}
    try:
        return (gettext(msg["msgid"]) if translate else msg["msgid"]) % params
    except (KeyError, TypeError, ValueError):
        return fallback or msg["msgid"]
