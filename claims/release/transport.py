"""Release transport: the HTTP requests to the API server, sent as planned.

On clusters where writes run as the signed-in user (accounts.rights.kube_identity: OIDC users, cluster
listed in GPUDASH_KUBE_IMPERSONATION), the cluster decides: a SubjectAccessReview for exactly the planned
request, then the request itself with Impersonate-User/Impersonate-Group headers. Reads stay on the
dashboard's own credentials.
"""

import json

import urllib3
from kubernetes.client.exceptions import ApiException
from urllib3 import HTTPHeaderDict

from mirror.kube import KubeError

from .plans import JSON, KubeRequest, claim_path

# The errors a request can end in before the API server's answer is known.
TRANSPORT_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError)


def live_state(client, namespace, name):
    """The claim and the namespace's pods {name: pod}, read live from the API server."""
    claim = client.get_json(claim_path(namespace, name))
    pod_list = client.get_json(f"/api/v1/namespaces/{namespace}/pods")
    pods = {(p.get("metadata") or {}).get("name"): p for p in pod_list.get("items") or []}
    return claim, pods


def send(api_client, request, timeout=10.0, impersonate=None):
    """Send one planned request as-is; returns (HTTP status, parsed body).

    `impersonate` = (user, groups): the request runs as that identity (Kubernetes impersonation headers).
    """
    method, url, headers, body, post_params = api_client.param_serialize(
        request.method,
        request.path,
        header_params={"Content-Type": request.content_type, "Accept": "application/json"},
        body=request.body,
        auth_settings=["BearerToken"],
    )
    if impersonate is not None:
        # param_serialize flattens headers into a dict, but Impersonate-Group is repeated once per group:
        # urllib3 sends every value of an HTTPHeaderDict key as its own header line.
        headers = HTTPHeaderDict(headers)
        user, groups = impersonate
        headers["Impersonate-User"] = user
        for group in groups:
            headers.add("Impersonate-Group", group)
    response = api_client.call_api(method, url, headers, body, post_params, _request_timeout=timeout).response
    try:
        data = response.data
    finally:
        response.release_conn()
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        body = {"raw": data[:500].decode("utf-8", "replace")}
    return response.status, body


# --- the cluster decides: SubjectAccessReview and impersonation -------------------------------------

AUTHZ_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
SELF_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
VERBS = {"GET": "get", "PATCH": "patch", "PUT": "update", "DELETE": "delete", "POST": "create"}
# Kubernetes adds this group to every authenticated user (impersonated ones too); a review must name it.
AUTHENTICATED = "system:authenticated"


def request_attributes(request):
    """The SubjectAccessReview resourceAttributes of a planned request (what the API server's authorizer sees)."""
    parts = [p for p in request.path.split("/") if p]
    group, version, rest = ("", parts[1], parts[2:]) if parts[0] == "api" else (parts[1], parts[2], parts[3:])
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    attrs = {"verb": VERBS[request.method], "group": group, "version": version, "resource": rest[0]}
    if namespace:
        attrs["namespace"] = namespace
    if len(rest) > 1:
        attrs["name"] = rest[1]
    if len(rest) > 2:
        attrs["subresource"] = rest[2]
    return attrs


def access_review(api_client, identity, request, timeout):
    """Ask the cluster whether `identity` (user, groups) may send `request`: {"allowed", "reason", ...}.

    Raises KubeError when the review itself cannot be made (then nothing is sent)."""
    user, groups = identity
    attrs = request_attributes(request)
    review = KubeRequest(
        "POST",
        AUTHZ_REVIEWS,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": [*groups, AUTHENTICATED], "resourceAttributes": attrs},
        },
        JSON,
        "",
    )
    try:
        status, body = send(api_client, review, timeout)
    except TRANSPORT_ERRORS as exc:
        raise KubeError(f"SubjectAccessReview failed: {exc}") from exc
    if not 200 <= status < 300:
        raise KubeError(f"SubjectAccessReview answered {status}: {body.get('message', '')}".rstrip(": "), status=status)
    answer = body.get("status") or {}
    reason = answer.get("reason") or answer.get("evaluationError") or ""
    return {"allowed": bool(answer.get("allowed")) and not answer.get("denied"), "reason": reason, "attributes": attrs}


def dashboard_identity(api_client, cluster, timeout):
    """Who the dashboard's own credentials are to the cluster (SelfSubjectReview), for the audit entry."""
    try:
        status, body = send(
            api_client,
            KubeRequest(
                "POST", SELF_REVIEW, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, JSON, ""
            ),
            timeout,
        )
        name = ((body.get("status") or {}).get("userInfo") or {}).get("username") if 200 <= status < 300 else ""
    except TRANSPORT_ERRORS:
        name = ""
    if name:
        return name
    return (
        "in-cluster service account" if cluster.in_cluster else f"kubeconfig context {cluster.context or '(current)'}"
    )
