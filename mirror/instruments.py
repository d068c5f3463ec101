"""Process-local instruments (observed where the work happens: the web process serving /metrics)."""

from prometheus_client import Histogram

# Allocation previews are interactive (web and API): their latency is what users feel.
PREVIEW_SECONDS = Histogram(
    "gpudash_preview_duration_seconds",
    "Time to compute an allocation preview.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=None,
)
