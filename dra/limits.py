"""Bounds on what one pasted input may hold (docs/allocator.md#input-limits).

Each is far above what a real input needs: the API takes at most 256 KiB of YAML, and a List of
500 distinct claims is about 200 KiB, 19,500 YAML nodes, and no aliases at all. They exist for
what a small text can stand for: YAML aliases let 500 bytes mean a billion nodes, and every later
walk (shape checks, messages, the engine) pays per node. Each refusal is an InputError that names
its limit.
"""

# Documents in one YAML stream (`---` separated); an input past it is refused at the next one.
MAX_DOCUMENTS = 1_000

# Items of one `kind: List`.
MAX_LIST_ITEMS = 1_000

# Uses of an alias (`*name`) in one input. Real claims rarely use any.
MAX_ALIASES = 10_000

# YAML nodes (scalars, lists, maps) after aliases are expanded, counted over the whole input: an
# alias adds the full size of the node it names, each time it is used. A 256 KiB List of claims is
# about 24,000 nodes, and even a 256 KiB flow list of one-digit numbers (`[1,2,...]`) 131,000, so
# only alias expansion or filler denser than that reaches it. Parsing stops there, which also bounds
# the time PyYAML's Python parser spends on one input.
MAX_NODES = 200_000

# Nesting of lists and maps; deeper than any Kubernetes object needs, and keeps every later walk far
# from Python's recursion limit.
MAX_DEPTH = 100
