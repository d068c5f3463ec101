"""Time limits: a per-node filter timeout like the scheduler's and a deadline for a whole request.

The kube-scheduler (v1.36, feature DRASchedulerFilterTimeout, beta and on) gives each Filter call of
the DynamicResources plugin 10 s (`filterTimeout` in the plugin args; 0 turns it off). The
allocator checks its context at every step of the search; when the time is up the plugin answers
with status Error "node <name>: timed out trying to allocate devices", which aborts the scheduling
attempt (like a CEL runtime error), not "unschedulable".

A preview adds a deadline for the whole request (`preview(..., deadline=...)`), so one preview,
class count or detector run can never hold a worker for long: nodes not decided in time are
reported as such, never as "does not fit".
"""

import time

FILTER_TIMEOUT_SECONDS = 10.0  # DynamicResourcesFilterTimeoutDefault


def timed_out_message(node):
    """The scheduler's wording for a Filter call that ran past its timeout."""
    return f"node {node}: timed out trying to allocate devices"


class Deadline:
    """A point in (monotonic) time; `None` seconds never expires."""

    __slots__ = ("seconds", "at", "cancelled")

    def __init__(self, seconds):
        if seconds is not None and seconds < 0:
            raise ValueError(f"deadline must be >= 0 seconds, got {seconds}")
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds
        self.cancelled = False

    @classmethod
    def of(cls, value):
        """A Deadline from seconds, an existing Deadline (shared), or None."""
        return value if isinstance(value, Deadline) else cls(value)

    def expired(self):
        return self.at is not None and time.monotonic() >= self.at

    def cancel(self):
        """Expire now (from any thread): the engine stops at its next check, as if time were up.
        `cancelled` reaches a node search that already took its stop time from `at`."""
        self.at = time.monotonic()
        self.cancelled = True

    def remaining(self):
        return None if self.at is None else max(0.0, self.at - time.monotonic())


class TimedOut(Exception):
    """Internal signal: the running node's time (filter timeout or request deadline) is up."""

    def __init__(self, whole_request):
        super().__init__("timed out")
        self.whole_request = whole_request
