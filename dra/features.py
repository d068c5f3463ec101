"""Which optional DRA features the simulated scheduler runs with (its feature gates), and quirk switches."""

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class Features:
    """Defaults are the kube-scheduler v1.36 defaults, where the *incubating* allocator runs.

    The `quirk_*` switches reproduce known v1.36 bugs bit-for-bit (on by default, so a preview says
    what the real 1.36 scheduler would do); turn them off for the fixed (1.37+) behaviour.
    """

    prioritized_list: bool = True
    partitionable_devices: bool = True
    admin_access: bool = True
    device_taints: bool = True
    # The DeviceTaintRule API (v1beta2) is off by default in 1.36.
    device_taint_rules: bool = False
    consumable_capacity: bool = True
    binding_conditions: bool = True
    # kubernetes#140436: counters of a device rejected by taints/constraints are never given back.
    quirk_counter_leak: bool = True
    # incubating/constraint.go keys distinctAttribute values by request name (C29 in dra-cases.md).
    quirk_distinct_per_request: bool = True
    # kubernetes#139730: a claim config naming two requests is added once per request.
    quirk_config_duplicates: bool = True

    @classmethod
    def from_dict(cls, data):
        """Features from a cluster's `features` JSON; unknown keys are an error (a typo must not pass)."""
        data = data or {}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown DRA feature setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**{k: bool(v) for k, v in data.items()})

    def to_dict(self):
        return asdict(self)
