"""dra/gcpause.py: the collector is off inside, back on after (errors included), left
off when it was off, and each decorated call (threads, nesting) keeps its own state."""

import gc
import threading

import pytest

from dra.gcpause import collector_paused


@pytest.fixture(autouse=True)
def collector_on():
    gc.enable()
    yield
    gc.enable()


def test_paused_inside_and_resumed_after_even_on_error():
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()  # it was off: it stays off


def test_a_decorated_function_keeps_its_state_per_call():
    seen = []

    @collector_paused()
    def work(depth):
        seen.append(gc.isenabled())
        if depth:
            work(depth - 1)  # nested: the inner call found it off and must not resume it
            seen.append(gc.isenabled())

    work(2)
    assert seen == [False, False, False, False, False] and gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    @collector_paused()
    def hold():
        inside.set()
        release.wait(5)

    work_in_thread = threading.Thread(target=hold)
    work_in_thread.start()
    inside.wait(5)
    work(0)  # another thread's call while the first holds the pause
    assert not gc.isenabled()  # the holder's pause stands
    release.set()
    work_in_thread.join(5)
    assert gc.isenabled()
