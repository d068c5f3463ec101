"""Errors of the allocation engine. Every one carries a message a person can act on."""


class AllocatorError(Exception):
    """Base class."""


class InputError(AllocatorError):
    """The claim/pod documents or the snapshot cannot be used (malformed YAML, unknown kind, ...)."""


class SnapshotError(InputError):
    """A cluster dump that lacks what a preview needs."""


class AllocationError(AllocatorError):
    """A hard error of the allocator: the scheduler would fail the scheduling attempt (status Error)."""
