"""What one allocation is worth in whole-GPU equivalents, and which rule says so.

One rule for the ledger (usage/ledger.py) and whoever else prices a partition:

whole       a device taken whole counts 1 (a whole GPU, or any device that is not a partition).
partition   a device drawing on part of its parent's counters (dra/partitions.py decides which
            devices are partitions) counts its share of the parent: with memory-slice counters
            (NVIDIA MIG under KEP-4815) the memory slices it consumes over the slices of its counter
            set, e.g. an A100 80GB 3g.40gb = 4 of 8; without them its largest share of any counter.
            Statically created MIG devices publish no counters but one `memorySlice<i>` capacity per
            slice they cover: their slices over the parent's (given, or known per GPU model below).
capacity    a share of a device with consumable capacity (allowMultipleAllocations) counts what the
            allocation consumed over what the device offers, on its scarcest capacity (20Gi of 80Gi
            memory = 0.25), times the device's own worth when the device is itself a partition.
admin       an admin-access allocation watches a device without taking it: 0, counted apart.

A MIG profile's memory slices, not its compute slices, are what it takes from the GPU: a 1g.10gb
leaves one of the A100's eight slices unusable by other profiles only through memory, and 4g.40gb
and 3g.40gb both hold half the memory. The figure is a fraction of the parent, so a partition's
units never exceed 1.
"""

import re
from dataclasses import dataclass
from fractions import Fraction

from .model import Slice, _q
from .partitions import GPU, PARTITION, default_kind, profile_of

WHOLE, CAPACITY, ADMIN = "whole", "capacity", "admin"
PARTITION_RULE = "partition"
RULES = (WHOLE, PARTITION_RULE, CAPACITY, ADMIN)

_SLICE_COUNTER = re.compile(r"^memory-slice-?\d+$")
_SLICE_CAPACITY = re.compile(r"^memorySlice\d+$")

# Memory slices of a whole GPU, for statically created MIG devices (which publish no counter set):
# NVML's GPU-instance layouts. Matched on the product name, first match wins.
MEMORY_SLICES_BY_MODEL = (
    ("A30", 4),
    ("A100", 8),
    ("A800", 8),
    ("H100", 8),
    ("H800", 8),
    ("H200", 8),
    ("H20", 8),
    ("B200", 8),
    ("GB200", 8),
)


@dataclass(frozen=True)
class Units:
    units: float  # whole-GPU equivalents
    rule: str  # one of RULES
    note: str  # how the figure was derived, for people
    kind: str = ""  # the device: gpu | partition | other (dra/partitions.py default_kind)

    def to_dict(self):
        return {"units": self.units, "rule": self.rule, "note": self.note, "kind": self.kind}


def _fmt(value):
    """A quantity or count as people write it: 4, 0.5, 20Gi."""
    if isinstance(value, Fraction) and value.denominator != 1:
        return f"{float(value):g}"
    return str(value)


def _plain(dev, name):
    value = dev.attribute(f"{dev.driver}/{name}")
    return str(value[1]) if value and value[0] == "string" and value[1] else ""


def memory_slices_of(model):
    """The memory slices of a whole GPU of this product name, 0 when unknown."""
    for needle, count in MEMORY_SLICES_BY_MODEL:
        if needle in (model or ""):
            return count
    return 0


def partition_share(dev, set_totals, parent_slices=None):
    """(share of the parent as a Fraction, note) of a partition; (None, note) when nothing says."""
    profile = profile_of(dev) if dev.has_counters else (_plain(dev, "profile") or dev.display_model())
    if dev.has_counters:
        used = total = 0
        best = None  # (share, counter, amount, of) without memory slices
        for set_name, counters in dev.consumes:
            totals = set_totals.get(set_name) or {}
            set_slices = sum(v for k, v in totals.items() if _SLICE_COUNTER.match(k))
            if set_slices:
                used += sum(v for k, v in counters.items() if _SLICE_COUNTER.match(k))
                total += set_slices
                continue
            for name, amount in counters.items():
                of = totals.get(name)
                if of:
                    share = Fraction(amount) / Fraction(of)
                    if best is None or share > best[0]:
                        best = (share, name, amount, of)
        if total:
            return Fraction(used, total), f"{profile}: {used} of {total} memory slices"
        if best is not None:
            share, name, amount, of = best
            return min(share, Fraction(1)), f"{profile}: {_fmt(amount)} of {_fmt(of)} {name}"
        return None, f"{profile}: consumes no counter of a known set"
    slices = sum(1 for name in dev.capacity if _SLICE_CAPACITY.match(name))
    model = _plain(dev, "productName") or _plain(dev, "model")
    of = parent_slices or memory_slices_of(model)
    if slices and of:
        return min(Fraction(slices, of), Fraction(1)), f"{profile}: {slices} of {of} memory slices"
    return None, f"{profile}: share of the parent unknown"


def capacity_share(dev, consumed):
    """(consumed / offered on the scarcest capacity, note), or (None, "") when no consumed capacity is
    one the device offers."""
    best = None
    for name, amount in (consumed or {}).items():
        offered = dev.capacity.get(name)
        if offered is None:
            continue
        try:
            used, of = _q(amount), offered[0]
        except Exception:
            continue
        if not of:
            continue
        share = Fraction(used) / Fraction(of)
        if best is None or share > best[0]:
            best = (share, name, amount, (dev.raw.get("capacity") or {}).get(name, {}).get("value", of))
    if best is None:
        return None, ""
    share, name, amount, of = best
    amount = amount.get("value") if isinstance(amount, dict) else amount
    return min(share, Fraction(1)), f"{name}: {amount} of {of}"


def device_units(dev, set_totals=None, *, consumed=None, admin_access=False, parent_slices=None):
    """Units of one allocation result on `dev` (a dra.model.Device). `set_totals`: {counter set:
    {counter: total}} of the device's pool; `consumed`: the result's consumedCapacity."""
    set_totals = set_totals or {}
    kind = default_kind(dev, set_totals)
    if admin_access:
        return Units(0.0, ADMIN, "admin access: watches the device without taking it", _kind_name(kind))
    worth, rule, note = Fraction(1), WHOLE, "whole device"
    if kind == PARTITION:
        share, why = partition_share(dev, set_totals, parent_slices)
        if share is not None:
            worth, rule, note = share, PARTITION_RULE, why
        else:
            note = f"{why}: counted as a whole device"
    elif kind == GPU:
        note = "whole GPU"
    if consumed:
        share, why = capacity_share(dev, consumed)
        if share is not None:
            if rule == PARTITION_RULE:
                why = f"{why} of {note}"
            return Units(float(worth * share), CAPACITY, why, _kind_name(kind))
    return Units(float(worth), rule, note, _kind_name(kind))


def _kind_name(kind):
    return kind if kind in (GPU, PARTITION) else "other"


def counter_totals(counter_sets):
    """{set: {counter: quantity}} from sharedCounters entries as published ([{name, counters}])."""
    holder = Slice({"metadata": {}, "spec": {"driver": "x", "pool": {"name": "x"}, "sharedCounters": counter_sets}})
    return dict(holder.counter_sets)


def raw_device_units(driver, pool, raw_device, counter_sets=(), **kwargs):
    """device_units for a device as published (its spec.devices[] entry) and its pool's sharedCounters
    entries; for callers that hold JSON rather than an engine inventory (the ledger)."""
    holder = Slice(
        {
            "metadata": {},
            "spec": {"driver": driver, "pool": {"name": pool}, "devices": [raw_device], "sharedCounters": []},
        }
    )
    totals = counter_totals(list(counter_sets)) if counter_sets else {}
    return device_units(holder.devices[0], totals, **kwargs)
