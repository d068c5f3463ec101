"""Admission control for previews: how many may be in flight at once, in all and per user.

A preview holds a worker for up to its deadline, so the web tier admits at most WORKERS + QUEUE of
them at a time (the rest answer 429 with Retry-After) and at most PER_USER per user, so that one
person's script cannot fill the queue for everyone. In the embedded default one web process sees
every request and counts in memory; with several web processes (production) the counts live in
Redis, as sorted sets of tickets that expire on their own if a web process dies holding one.
"""

import math
import threading
import time
import uuid
from collections import deque

from claims.preview_service.config import limits


class PreviewBusy(Exception):
    """Too many previews in flight (429): `retry_after` seconds is a fair time to wait."""

    def __init__(self, message, retry_after):
        super().__init__(message)
        self.retry_after = retry_after


class _Durations:
    """Recent preview durations in this process, for a Retry-After that matches the fleet's size."""

    def __init__(self, keep=50):
        self._seen = deque(maxlen=keep)

    def add(self, seconds):
        self._seen.append(seconds)

    def retry_after(self):
        if not self._seen:
            return 2
        ordered = sorted(self._seen)
        return max(1, min(60, math.ceil(ordered[len(ordered) // 2])))


durations = _Durations()


def _refusal(scope, in_flight, limit):
    wait = durations.retry_after()
    if scope == "user":
        text = f"you already have {in_flight} previews running (at most {limit} per user); try again in about {wait} s"
    else:
        text = f"the preview workers are busy ({in_flight} previews in flight, at most {limit}); try again in about {wait} s"
    return PreviewBusy(text, wait)


class LocalAdmission:
    """Counts in this process (the embedded default's single web process)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._total = 0
        self._per_user = {}

    def acquire(self, user_key, hold_seconds):
        cfg = limits()
        with self._lock:
            mine = self._per_user.get(user_key, 0)
            if mine >= cfg["PER_USER"]:
                raise _refusal("user", mine, cfg["PER_USER"])
            if self._total >= cfg["WORKERS"] + cfg["QUEUE"]:
                raise _refusal("all", self._total, cfg["WORKERS"] + cfg["QUEUE"])
            self._total += 1
            self._per_user[user_key] = mine + 1
        return user_key

    def release(self, ticket):
        with self._lock:
            self._total -= 1
            left = self._per_user.get(ticket, 1) - 1
            if left:
                self._per_user[ticket] = left
            else:
                self._per_user.pop(ticket, None)

    def in_flight(self):
        with self._lock:
            return self._total


# KEYS: the global and the user's sorted set of tickets (score: when the ticket expires, in ms).
# ARGV: ticket, hold ms, global limit, user limit. Returns {0} when admitted, else {1 (user) or 2
# (global), tickets in flight}. Redis's own clock, so web processes on other hosts agree.
_ACQUIRE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
local mine = redis.call('ZCARD', KEYS[2])
if mine >= tonumber(ARGV[4]) then return {1, mine} end
local total = redis.call('ZCARD', KEYS[1])
if total >= tonumber(ARGV[3]) then return {2, total} end
local until_ms = now_ms + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], until_ms, ARGV[1])
redis.call('ZADD', KEYS[2], until_ms, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {0, total + 1}
"""


class RedisAdmission:
    """Counts shared by every web process (production), in Redis."""

    PREFIX = "gpudash:preview:admission"

    def __init__(self, client):
        self._client = client
        self._acquire = client.register_script(_ACQUIRE)

    def acquire(self, user_key, hold_seconds):
        cfg = limits()
        ticket = uuid.uuid4().hex
        keys = [f"{self.PREFIX}:all", f"{self.PREFIX}:user:{user_key}"]
        outcome, count = self._acquire(
            keys=keys, args=[ticket, int(hold_seconds * 1000), cfg["WORKERS"] + cfg["QUEUE"], cfg["PER_USER"]]
        )
        if outcome == 1:
            raise _refusal("user", count, cfg["PER_USER"])
        if outcome == 2:
            raise _refusal("all", count, cfg["WORKERS"] + cfg["QUEUE"])
        return keys, ticket

    def release(self, ticket):
        keys, member = ticket
        pipe = self._client.pipeline()
        for key in keys:
            pipe.zrem(key, member)
        pipe.execute()

    def in_flight(self):
        return self._client.zcount(f"{self.PREFIX}:all", time.time() * 1000, "+inf")
