"""The device-state vocabulary and what pages call each state: one set of words for the UI, the API, the
filters and the shared template tags.

How a device gets its state is inventory's (inventory/devicestate.py: stored columns kept current by the
sync, plus SQL for stuck claims and NotReady nodes); the words live here, on the ground floor, because
the shared template tags (mirror/templatetags/gpudash_ui.py), inventory, claims and monitoring all
show them. `STATES` order is the display order of filters; see inventory/devicestate.py for what each
state means.
"""

from django.utils.translation import gettext_lazy as _

STUCK, ALLOCATED, ADMIN, PARTIAL, TAINTED, UNHEALTHY, FREE = (
    "stuck",
    "allocated",
    "admin",
    "partial",
    "tainted",
    "unhealthy",
    "free",
)
STATES = (FREE, ALLOCATED, ADMIN, PARTIAL, TAINTED, UNHEALTHY, STUCK)
# Secondary flags a device carries whatever its state.
FLAGS = (TAINTED, UNHEALTHY, ADMIN)
# Values of the stored column (the rest are derived at read time).
STORED_STATES = (FREE, ALLOCATED, ADMIN, PARTIAL)

# The API's v1 `state` values and the states each one covers.
API_STATES = {
    "free": (FREE,),
    "allocated": (ALLOCATED, STUCK),
    "shared": (PARTIAL,),
    "admin": (ADMIN,),
    "tainted": (TAINTED, UNHEALTHY),  # not held, but new claims are kept off it
}
API_STATE_OF = {state: api for api, states in API_STATES.items() for state in states}

STATE_LABELS = {  # what pages show; the keys are the vocabulary of filters, URLs and the API
    FREE: _("free"),
    ALLOCATED: _("allocated"),
    ADMIN: _("admin access"),
    PARTIAL: _("partially used"),
    TAINTED: _("tainted"),
    UNHEALTHY: _("node not ready"),
    STUCK: _("stuck claim"),
}
# What "any state" counts of the secondary flags are called.
FLAG_LABELS = {TAINTED: _("tainted"), UNHEALTHY: _("on NotReady nodes"), ADMIN: _("watched with admin access")}

# The order the overview tiles and the map summary list the states in (used first, then free).
DISPLAY_STATES = (ALLOCATED, STUCK, ADMIN, PARTIAL, TAINTED, UNHEALTHY, FREE)


def state_label(state):
    """A state's label in the active language, as a str (titles join it, SQL sorts by it)."""
    return str(STATE_LABELS.get(state, state))
