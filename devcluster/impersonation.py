"""Impersonation and SubjectAccessReview for the devcluster, the way kube-apiserver does them.

A request carrying `Impersonate-User` (and optionally repeated `Impersonate-Group` headers) is first
checked against the *caller's* rules: it needs verb `impersonate` on `users` (core group) named that user,
and on `groups` named each group. Then the request runs as the impersonated identity, whose rules the test
sets per user and per group in `Subjects`; those rules are always enforced. SubjectAccessReviews naming a
user or groups are answered from the same rules, so a test can make the review and the write agree (or not).
"""

import collections

from .store import ApiError, BadRequest

AUTHN_GROUP = "authentication.k8s.io"
IMPERSONATE_USER = "Impersonate-User"
IMPERSONATE_GROUP = "Impersonate-Group"
# Every authenticated identity is in this group in Kubernetes; rules for it apply to everyone.
AUTHENTICATED = "system:authenticated"
# Who the server's own token is (the name in its 403 messages).
CALLER = "devcluster-user"


class Subjects:
    """RBAC PolicyRule dicts per user and per group (optionally with "namespaces": [...]), set by tests."""

    def __init__(self):
        self.users = {}
        self.groups = {}
        self.enabled = False
        # (method, path, user, groups) of every impersonated request, for tests to inspect.
        self.seen = collections.deque(maxlen=2000)

    def set_user_rules(self, user, rules):
        self.users[user] = list(rules)

    def set_group_rules(self, group, rules):
        self.groups[group] = list(rules)

    def enable(self):
        """Answer reviews naming a subject from these rules even while none are set (so: denied)."""
        self.enabled = True

    def clear(self):
        self.users.clear()
        self.groups.clear()
        self.enabled = False

    def rules_for(self, user, groups):
        rules = list(self.users.get(user, []))
        for group in (*groups, AUTHENTICATED):
            rules += self.groups.get(group, [])
        return rules

    def configured(self):
        # Until then, reviews naming a subject are answered from the caller's rules (the readiness tests).
        return self.enabled or bool(self.users or self.groups)


def denial(user, groups, verb, group, resource, subresource, namespace):
    full = f"{resource}/{subresource}" if subresource else resource
    where = f' in the namespace "{namespace}"' if namespace else ""
    member = f" (groups {', '.join(groups)})" if groups else ""
    return f'RBAC: user "{user}"{member} has no rule allowing {verb} on "{full}" in API group "{group}"{where}'


def impersonated_identity(server, request, caller_rules):
    """(user, groups) the request asks to run as, checked against the caller's rules; None when not asked."""
    user = request.headers.get(IMPERSONATE_USER)
    groups = request.headers.getall(IMPERSONATE_GROUP, [])
    if user is None:
        if groups:
            raise BadRequest(f"{IMPERSONATE_GROUP} was sent without {IMPERSONATE_USER}")
        return None
    if not user:
        raise BadRequest(f"{IMPERSONATE_USER} is empty")
    wanted = [("users", user)] + [("groups", g) for g in groups]
    for resource, name in wanted:
        if not server._allowed(caller_rules, "impersonate", "", resource, None, None, name):
            kind = "user" if resource == "users" else "group"
            raise ApiError(
                403,
                "Forbidden",
                f'{resource} "{name}" is forbidden: User "devcluster-user" cannot impersonate '
                f'resource "{resource}" in API group "" ({kind} {name!r} not allowed)',
            )
    server.subjects.seen.append((request.method, request.path_qs, user, list(groups)))
    return user, list(groups)


def review(server, spec):
    """The status of a SubjectAccessReview naming a user or groups, from the subjects' rules."""
    user, groups = spec.get("user") or "", list(spec.get("groups") or [])
    attrs = spec.get("resourceAttributes") or {}
    verb, group, resource = attrs.get("verb", ""), attrs.get("group", ""), attrs.get("resource", "")
    sub, namespace, name = attrs.get("subresource", ""), attrs.get("namespace", ""), attrs.get("name", "")
    rules = server.subjects.rules_for(user, groups)
    allowed = server._allowed(rules, verb, group, resource, sub, namespace, name)
    if allowed:
        return {"allowed": True, "reason": f'RBAC: allowed by a devcluster rule for user "{user}" or its groups'}
    return {"allowed": False, "reason": denial(user, groups, verb, group, resource, sub, namespace)}


def self_subject_review(request):
    """A SelfSubjectReview answer: who the caller is (the impersonated identity, when impersonating)."""
    user, groups = request.get("identity") or (CALLER, [])
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": f"{AUTHN_GROUP}/v1",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": {"username": user, "groups": [*groups, AUTHENTICATED]}},
    }
