"""Identity-provider groups -> a gpudash role and namespace scope (no Django imports: parsed at settings time).

`OIDC_GROUP_MAP` is a `;`-separated list of `GROUP=ROLE[:NS1,NS2,...]` entries, e.g.
`gpu-team-a=operator:team-a,team-a-dev; gpu-viewers=viewer; gpu-admins=admin`. A user gets the highest
role among the entries of their groups, over the union of those entries' namespaces (an entry without
namespaces means every namespace). Groups without an entry give nothing.
"""

from dataclasses import dataclass

ROLES = ("viewer", "operator", "admin")  # the names of mirror.roles, repeated so settings need no Django
_RANK = {role: rank for rank, role in enumerate(ROLES, start=1)}


class GroupMapError(ValueError):
    """The group map setting cannot be parsed; the message names the entry."""


@dataclass(frozen=True)
class GroupRule:
    group: str
    role: str
    namespaces: tuple = ()  # () = every namespace


@dataclass
class Rights:
    role: str | None
    namespaces: list | None  # None = every namespace
    sources: list  # [(right, group)] in words, for the access profile page


def parse_group_map(text):
    rules = []
    for position, entry in enumerate((text or "").split(";"), start=1):
        entry = entry.strip()
        if not entry:
            continue
        group, sep, grant = entry.partition("=")
        group, grant = group.strip(), grant.strip()
        if not sep or not group or not grant:
            raise GroupMapError(f"OIDC_GROUP_MAP entry {position} ({entry!r}): expected GROUP=ROLE[:NAMESPACES]")
        role, _, namespaces = grant.partition(":")
        role = role.strip()
        if role not in _RANK:
            raise GroupMapError(
                f"OIDC_GROUP_MAP entry {position} ({entry!r}): role {role!r} is not one of {', '.join(ROLES)}"
            )
        names = tuple(n.strip() for n in namespaces.split(",") if n.strip())
        if namespaces.strip() and not names:
            raise GroupMapError(f"OIDC_GROUP_MAP entry {position} ({entry!r}): empty namespace list")
        rules.append(GroupRule(group, role, names))
    return rules


def rights_for(groups, rules):
    """The role, scope and their sources for a user in `groups`."""
    groups = set(groups or ())
    matching = [r for r in rules if r.group in groups]
    if not matching:
        return Rights(None, [], [])
    role = max((r.role for r in matching), key=_RANK.__getitem__)
    sources = [(f"role {r.role}", r.group) for r in matching]
    if role == "admin" or any(not r.namespaces for r in matching):
        namespaces = None
        sources += [("every namespace", r.group) for r in matching if not r.namespaces or r.role == "admin"]
    else:
        namespaces = sorted({n for r in matching for n in r.namespaces})
        sources += [(f"namespace {n}", r.group) for r in matching for n in r.namespaces]
    return Rights(role, namespaces, sources)
