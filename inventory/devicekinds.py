"""What kind of device a published DRA device is, and which physical GPU it belongs to.

The one place that decides it (stored on Device.kind / Device.parent when a slice is written, summed
by inventory/summary.py, read by the overview, the map, the node pages, the API and the history):

  gpu        a whole GPU: attribute `type` "gpu" (or "vfio", a GPU handed whole to a VM), or, for a
             driver publishing no `type`, a device of a driver named `gpu.<vendor>` (dra-example-driver,
             AMD's and Intel's drivers)
  partition  a slice of a GPU (MIG): `type` "mig", a `parentUUID` attribute, or a device that draws on
             the same shared counters as a whole GPU of its slice (KEP-4815 partitionable devices)
  other      anything else: NICs, FPGAs, compute-domain channels ...

`parent` names the physical GPU a gpu or partition device is part of, unique within its pool: the GPU's
`uuid` (a partition's `parentUUID`), else the counter set the GPU consumes, else the device name. One
physical GPU = one whole GPU, however many partitions it is published as; it is free when none of its
devices is held (admin access excepted) and none is tainted (summary.py).
"""

GPU, PARTITION, OTHER = "gpu", "partition", "other"
KINDS = (GPU, PARTITION, OTHER)
KIND_LABELS = {GPU: "whole GPUs", PARTITION: "partitions", OTHER: "other devices"}
GPU_TYPES = ("gpu", "vfio")
PARTITION_TYPES = ("mig",)


def _plain(attributes, name, driver):
    """A string attribute's value, bare or qualified with the driver's domain."""
    attr = attributes.get(name)
    if attr is None:
        attr = attributes.get(f"{driver}/{name}")
    if isinstance(attr, dict):
        value = attr.get("string")
        return value if isinstance(value, str) else None
    return None


def _counter_sets(device):
    return [
        c.get("counterSet") for c in device.get("consumesCounters") or () if isinstance(c, dict) and c.get("counterSet")
    ]


def classify(driver, devices):
    """[(kind, parent)] for the `devices` (raw dicts) of one slice of `driver`, in order."""
    devices = [d if isinstance(d, dict) else {} for d in devices]
    own, untyped = [], []
    for dev in devices:
        attributes = dev.get("attributes") if isinstance(dev.get("attributes"), dict) else {}
        dtype = (_plain(attributes, "type", driver) or "").lower()
        if dtype in PARTITION_TYPES or _plain(attributes, "parentUUID", driver):
            kind = PARTITION
        elif dtype in GPU_TYPES or (not dtype and driver.startswith("gpu.")):
            kind = GPU
            if not dtype:
                untyped.append(len(own))
        else:
            kind = OTHER
        own.append((kind, attributes, dev))
    # Untyped devices of a GPU driver drawing on one counter set: the one consuming the most counters
    # is the whole GPU, the others are its partitions (unless a typed GPU already owns the set).
    typed_sets = {
        name for i, (kind, _a, dev) in enumerate(own) if kind == GPU and i not in untyped for name in _counter_sets(dev)
    }
    by_set = {}
    for i in untyped:
        dev = own[i][2]
        for entry in dev.get("consumesCounters") or ():
            if isinstance(entry, dict) and entry.get("counterSet"):
                by_set.setdefault(entry["counterSet"], []).append((-len(entry.get("counters") or {}), i))
    for name, members in by_set.items():
        members.sort()
        for rank, (_size, i) in enumerate(members):
            if rank or name in typed_sets:
                kind, attributes, dev = own[i]
                own[i] = (PARTITION, attributes, dev)
    # The physical GPU behind each counter set a whole GPU consumes: its partitions draw on the same set.
    gpu_of_set = {}
    for kind, attributes, dev in own:
        if kind == GPU:
            for name in _counter_sets(dev):
                gpu_of_set.setdefault(name, _plain(attributes, "uuid", driver) or f"counters:{name}")
    out = []
    for kind, attributes, dev in own:
        sets = _counter_sets(dev)
        if kind == OTHER and any(s in gpu_of_set for s in sets):
            kind = PARTITION  # no type attribute, but it draws on a GPU's counters
        if kind == GPU:
            parent = _plain(attributes, "uuid", driver) or (
                f"counters:{sets[0]}" if sets else f"device:{dev.get('name') or ''}"
            )
        elif kind == PARTITION:
            parent = _plain(attributes, "parentUUID", driver) or next(
                (gpu_of_set[s] for s in sets if s in gpu_of_set), None
            )
            parent = parent or (f"counters:{sets[0]}" if sets else f"device:{dev.get('name') or ''}")
        else:
            parent = ""
        out.append((kind, parent[:253]))
    return out
