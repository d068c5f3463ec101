"""Pausing Python's cyclic garbage collector around work that makes many short-lived objects.

A fleet-wide preview, an inventory build, a pool summary or a sync batch makes tens or hundreds of
thousands of small dicts and lists, none in a reference cycle, that live until the work ends. Their
number triggers collections that re-scan them (and the rest of the young heap) again and again, a
large share of such work (BENCHMARKS.md, "Figures once quoted in the code"). Reference counting frees
them as usual; the collector runs after.
Only the thread that paused it resumes it (another thread's pause in between stays until then).
"""

import gc
from contextlib import ContextDecorator


class collector_paused(ContextDecorator):  # noqa: N801 - used as a decorator and a with-statement
    def _recreate_cm(self):
        return type(self)()  # a fresh one per decorated call: threads and nested calls keep their own state

    def __enter__(self):
        self._resume = gc.isenabled()
        if self._resume:
            gc.disable()
        return self

    def __exit__(self, *exc):
        if self._resume:
            gc.enable()
        return False
