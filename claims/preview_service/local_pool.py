"""The embedded default's preview workers: a few processes beside the web process.

Each worker is its own Python process (its own GIL), sets Django up on the web process's database,
keeps its live preview inventories warm (claims/live_inventory.py catches up from the sync's change
log) and runs one job at a time. The web process hands a job to an idle worker over a pipe and waits
for the answer without holding the GIL, so pages, websockets and /healthz stay fast whatever a preview
costs.

Written here rather than with concurrent.futures.ProcessPoolExecutor: that pool cannot cancel a job
once it runs and breaks as a whole when one worker dies, and a preview pool must do both: stop a job
whose client went away, and lose one worker to `kill -9` without failing the next preview.
"""

import itertools
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from multiprocessing.connection import wait as wait_for_any

log = logging.getLogger(__name__)

POLL = 0.05  # how often a waiting request looks at its client and its worker
# Preview workers share the web process's cores in the embedded default: on a busy machine the kernel
# then serves pages and probes first, and long previews take the time that is left.
WORKER_NICENESS = 10


class PreviewWorkerLost(Exception):
    """The worker running a preview died or stopped answering (503): the preview can be asked again."""


class PreviewCancelled(Exception):
    """The client went away: the job was cancelled and nobody waits for its answer."""


def worker_main(conn, database_name, warm_up):
    """A worker process: set Django up, then answer jobs until the web process goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal stops the web process, which stops us
    os.nice(WORKER_NICENESS)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = database_name  # the web process's (a test run's own database too)
    import django

    django.setup()
    from claims.live_inventory import warm_up as warm_inventories
    from claims.preview_service.jobs import job_deadline, run_job

    jobs = queue.Queue()
    current = {"id": None, "deadline": None}
    cancelled = set()
    lock = threading.Lock()

    def read():
        # Jobs and cancellations arrive on one pipe; reading it in a thread lets a cancel reach the
        # job that the main thread is running.
        try:
            while True:
                kind, job_id, payload = conn.recv()
                if kind == "job":
                    jobs.put((job_id, payload))
                elif kind == "cancel":
                    with lock:
                        if current["id"] == job_id:
                            current["deadline"].cancel()
                        else:
                            cancelled.add(job_id)
        except (EOFError, OSError):
            os._exit(0)  # the web process is gone: nothing left to answer

    threading.Thread(target=read, name="preview-worker-pipe", daemon=True).start()
    conn.send(("ready", os.getpid(), None))
    if warm_up:
        started = time.monotonic()
        warm_inventories()
        conn.send(("warm", os.getpid(), time.monotonic() - started))
    while True:
        job_id, job = jobs.get()
        with lock:
            if job_id in cancelled:
                cancelled.discard(job_id)
                continue
            deadline = job_deadline(job)
            current.update(id=job_id, deadline=deadline)
        answer = run_job(job, deadline)
        with lock:
            current.update(id=None, deadline=None)
        conn.send(("answer", job_id, answer))


class _Worker:
    def __init__(self, context, database_name, warm_up):
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=worker_main, args=(child, database_name, warm_up), name="gpudash-preview-worker", daemon=True
        )
        self.process.start()
        child.close()
        self.pid = self.process.pid
        self.ready = False
        self.warm = not warm_up
        self.job = None  # (job id, since) while it runs one
        self.send_lock = threading.Lock()
        self.recv_lock = threading.Lock()  # held by the one thread reading its answers

    def alive(self):
        return self.process.is_alive()

    def send(self, message):
        with self.send_lock:
            self.conn.send(message)

    def stop(self):
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class LocalPool:
    """`size` worker processes; `run` blocks the calling thread (not the GIL) until the answer."""

    def __init__(self, size, database_name, warm_up):
        self._context = multiprocessing.get_context("spawn")  # fork would copy the web process's threads and sockets
        self._database_name = database_name
        self._warm_up = warm_up
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._idle = queue.Queue()
        self._started = time.monotonic()
        self._workers = [self._start() for _ in range(size)]
        for index in range(size):
            self._idle.put(index)

    def _start(self):
        return _Worker(self._context, self._database_name, self._warm_up)

    def run(self, job, wait_seconds, client_gone=None):
        """(answer bytes, worker timing) of `job` (jobs.run_job). Waits for a free worker at most `wait_seconds` in all;
        PreviewCancelled when `client_gone` (a threading.Event) is set first, PreviewWorkerLost when the
        worker dies or does not answer in time."""
        until = time.monotonic() + wait_seconds
        index = self._take_idle(until, client_gone)
        worker = self._workers[index]
        job_id = next(self._ids)
        keep_worker = True
        worker.recv_lock.acquire()
        try:
            worker.job = (job_id, time.time())
            try:
                worker.send(("job", job_id, job))
            except OSError:
                keep_worker = False
                raise PreviewWorkerLost("the preview worker had stopped; it is being restarted") from None
            while True:
                ready = wait_for_any([worker.conn, worker.process.sentinel], POLL)
                if worker.conn in ready:
                    message = self._read(worker)
                    if message is not None:
                        answer = self._note(worker, message, job_id)
                        if answer is not None:
                            return answer
                        continue
                if ready or not worker.alive():  # its pipe closed, or the process ended
                    keep_worker = False
                    raise PreviewWorkerLost(
                        f"the preview worker (pid {worker.pid}) died while running this preview; "
                        "it is being restarted: ask again"
                    )
                if client_gone is not None and client_gone.is_set():
                    worker.send(("cancel", job_id, None))  # it stops at the engine's next deadline check
                    raise PreviewCancelled()
                if time.monotonic() > until:
                    keep_worker = False  # past its own deadline and the grace: it is not answering
                    raise PreviewWorkerLost(
                        f"the preview worker (pid {worker.pid}) did not answer in time; it is being restarted"
                    )
        finally:
            worker.job = None
            worker.recv_lock.release()
            if not keep_worker:
                self._replace(index)
            self._idle.put(index)

    @staticmethod
    def _read(worker):
        """The next message from `worker`, or None when its pipe is closed (the process died)."""
        try:
            return worker.conn.recv()
        except (EOFError, OSError):
            return None

    @staticmethod
    def _note(worker, message, job_id):
        """The answer of `job_id` if that is what `message` is; other messages are bookkeeping."""
        kind, message_id, payload = message
        if kind == "ready":
            worker.ready = True
        elif kind == "warm":
            worker.warm = True
        elif kind == "answer" and message_id == job_id:
            return payload
        return None  # e.g. the late answer of a job whose client went away

    def _take_idle(self, until, client_gone):
        while True:
            try:
                return self._idle.get(timeout=POLL)
            except queue.Empty:
                pass
            if client_gone is not None and client_gone.is_set():
                raise PreviewCancelled()
            if time.monotonic() > until:
                raise PreviewWorkerLost("no preview worker became free in time")

    def _replace(self, index):
        with self._lock:
            old = self._workers[index]
            old.stop()
            self._workers[index] = self._start()
            log.warning("preview worker pid %s replaced by pid %s", old.pid, self._workers[index].pid)

    def status(self):
        """One entry per worker: pid, alive, warm, and the job it runs (id and since, epoch seconds)."""
        out = []
        for worker in list(self._workers):
            self._drain(worker)
            job = worker.job
            out.append(
                {
                    "pid": worker.pid,
                    "alive": worker.alive(),
                    "warm": worker.warm,
                    "job": None if job is None else {"id": str(job[0]), "since": job[1]},
                }
            )
        return out

    def _drain(self, worker):
        """Read an idle worker's "ready"/"warm" news (a busy worker's thread reads them itself)."""
        if not worker.recv_lock.acquire(blocking=False):
            return
        try:
            while worker.conn.poll(0):
                message = self._read(worker)
                if message is None:
                    break
                self._note(worker, message, None)
        except OSError:
            pass
        finally:
            worker.recv_lock.release()

    def warm_up_state(self):
        """("warming" | "done", seconds since the pool started): "done" once every live worker is warm,
        or after live_inventory.WARM_UP_READY_WAIT (previews then build what they need themselves)."""
        from claims.live_inventory import WARM_UP_READY_WAIT

        running = time.monotonic() - self._started
        if running < WARM_UP_READY_WAIT and any(not w["warm"] for w in self.status() if w["alive"]):
            return "warming", running
        return "done", running

    def stop(self):
        for worker in self._workers:
            worker.stop()
