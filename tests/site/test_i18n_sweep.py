"""Every page in Chinese: the demo fleet loaded into the mirror, every list and detail page (the same set
as the layout test) rendered with the test client in zh_Hans, and each page's visible text (and the
attributes people read) searched for English words.

What may stay English: Kubernetes terms and kinds (an allow-list, below and tests/template_text.py),
the names of objects and what they carry (node, pod, device, class, driver, namespace, label and
attribute names and values: taken from the mirror), code (`<code>`, `<pre>`, `<kbd>`, `translate="no"`),
and the scheduler's own messages (kept word for word, so they can be searched for in its logs)."""

import re
from collections import defaultdict
from html import unescape

import pytest
from django.conf import settings

from claims.models import Pod, ResourceClaim, ResourceClaimTemplate
from inventory.models import Device, DeviceClass, Node, ResourceSlice
from mirror import roles
from mirror.models import Cluster, KubeEvent
from tests.conftest import runs_previews  # noqa: E402
from tests.fleet_data import load_scenario
from tests.site.test_layout_browser import every_page
from tests.template_text import UNTRANSLATED_TERMS
from tests.ui_fixtures import make_user

pytestmark = [pytest.mark.django_db]

# Kubernetes and DRA vocabulary as Kubernetes writes it (field names, phases, conditions, reasons,
# plugin names, units), product names and acronyms: written the same in a Chinese UI.
KUBERNETES_TERMS = {
    *UNTRANSLATED_TERMS,
    *"""node nodes namespace namespaces daemonset daemonsets deployment events event kubelet scheduler
    kube-scheduler kube-controller-manager apiserver api-server server
    devicetaintrules devicetaintrule resourcepoolstatusrequest podgroup configmap
    notready ready unknown running pending succeeded failed unschedulable schedulinggated
    podscheduled initialized containersready bound
    noschedule noexecute none preferNoSchedule prefernoschedule
    reservedfor allocation nodeselector nodename nodeaffinity taints tolerations toleration
    exactly firstavailable adminaccess allocationmode exactcount all count selectors selector cel
    sharedcounters consumescounters counters capacity attributes bindingconditions bindingfailureconditions
    bindstonode allowmultipleallocations requestpolicy consumedcapacity shareid distinctattribute
    extendedresourcename deviceclassname devicetaint spec status metadata finalizers
    nodeunschedulable tainttoleration noderesourcesfit nodeports dynamicresources volumebinding
    interpodaffinity podtopologyspread nodevolumelimits volumerestrictions volumezone
    nvidia amd intel rdma infiniband mellanox a100 h100 l4 hbm3 pcie nvlink cuda nvml xid
    mig-enabled mps timeslicing
    b kb mb gb tb ki mi gi ti kib mib gib tib m h d min ms s ns utc z
    ok http https grpc tls ca oidc saml ldap csv http-only
    github docs openapi swagger redoc drf django celery redis postgresql sqlite daphne channels
    qps burst p50 p95 p99 max min avg
    v1 v1beta1 v1beta2 v1alpha3 get post put patch delete
    driver pool device list watch create update finalizer exporter
    readyz healthz livez metrics
    """.split(),
}


def _mirror_words(cluster):
    """Every word of every mirrored object's names, labels, attributes and scheduler messages."""
    words = set()

    def add(value):
        if isinstance(value, dict):
            for k, v in value.items():
                add(k)
                add(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                add(v)
        elif value is not None:
            words.update(w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", str(value)))

    for model in (Node, Device, DeviceClass, ResourceSlice, Pod, ResourceClaim, ResourceClaimTemplate):
        for raw in model.objects.filter(cluster=cluster).values_list("raw", flat=True).iterator():
            meta = (raw or {}).get("metadata") or {}
            add([meta.get("name"), meta.get("namespace"), meta.get("labels"), meta.get("annotations")])
            add(meta.get("ownerReferences"))
            spec = (raw or {}).get("spec") or {}
            add([spec.get("driver"), spec.get("pool"), spec.get("nodeName"), spec.get("taints")])
            add([d.get("name") for d in spec.get("devices") or [] if isinstance(d, dict)])
            add([d.get("attributes") for d in spec.get("devices") or [] if isinstance(d, dict)])
            add([d.get("capacity") for d in spec.get("devices") or [] if isinstance(d, dict)])
            add([d.get("taints") for d in spec.get("devices") or [] if isinstance(d, dict)])
            add([c.get("image") for c in spec.get("containers") or [] if isinstance(c, dict)])
            add([c.get("name") for c in spec.get("containers") or [] if isinstance(c, dict)])
            status = (raw or {}).get("status") or {}
            # The scheduler's own words, kept as it writes them.
            add([c.get("message") for c in status.get("conditions") or [] if isinstance(c, dict)])
            add([c.get("reason") for c in status.get("conditions") or [] if isinstance(c, dict)])
    for row in KubeEvent.objects.filter(cluster=cluster).values_list("reason", "message"):
        add(row)
    return words


_SKIP = re.compile(
    r"<(script|style|code|pre|kbd|samp|textarea|template)\b.*?</\1\s*>|<!--.*?-->|<[^>]*\btranslate=\"no\"[^>]*>.*?</[^>]+>",
    re.S | re.I,
)
_ATTRS = re.compile(r"""\b(title|placeholder|aria-label|alt)\s*=\s*"([^"]*)\"""")
_TAG = re.compile(r"""<(?:[^>"']|"[^"]*"|'[^']*')*>""")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*")
# Identifiers read as themselves: with a digit (gpu-l4-01, HBM3), camelCase (resourceVersion), ALLCAPS.
_IDENTIFIER = re.compile(r"\d|[a-z][A-Z]|^[A-Z]{2,}$")


def english_words(html, allowed):
    """{word: [context, ...]} of English words in a page's visible text and read attributes."""
    body = "<body" + html.split("<body", 1)[-1]
    body = _SKIP.sub(" ", body)
    texts = [unescape(v) for _, v in _ATTRS.findall(body)]
    texts += [unescape(t) for t in _TAG.split(body)]
    found = defaultdict(list)
    for text in texts:
        # Identifiers and paths read as themselves: dotted, slashed, key=value, snake_case, URLs.
        text = re.sub(r"\S*[./=_:@]\S*|`[^`]*`", " ", text)
        for word in _WORD.findall(text):
            word = word.strip("'-")
            if not word or _IDENTIFIER.search(word):
                continue
            parts = [p for p in re.split(r"[-']", word.lower()) if p]
            if word.lower() in allowed or all(p in allowed for p in parts):
                continue
            if len(found[word]) < 2:
                found[word].append(" ".join(text.split())[:160])
    return found


@pytest.fixture
def demo(db):
    from claims.models import ACTION_TITLES, AuditEntry

    cluster = load_scenario(Cluster.objects.create(name="demo"))
    claim = ResourceClaim.objects.filter(cluster=cluster).order_by("namespace", "name").first()
    for action, outcome in zip(ACTION_TITLES, ("done", "dry-run", "refused", "conflict"), strict=False):
        AuditEntry.objects.create(
            cluster=cluster,
            cluster_name=cluster.name,
            username="zhao",
            namespace=claim.namespace,
            claim_name=claim.name,
            action=action,
            outcome=outcome,
            dry_run=outcome == "dry-run",
        )
    return cluster


# The Pending explainer asks a preview worker: it must see the fleet's rows (committed), or the engine
# step answers an error instead of what a user reads.
@runs_previews
def test_every_page_in_chinese_has_no_stray_english(client, demo):
    client.force_login(make_user("zhao", role=roles.ADMIN))
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    # Errors passed through from the Kubernetes client stay as it writes them (here: no kubeconfig).
    from ops.pending import ClusterReader

    with ClusterReader(demo) as reader:
        passed_through = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z-]*", reader.error)}
    allowed = KUBERNETES_TERMS | _mirror_words(demo) | passed_through | {"demo", "zhao"}
    problems = {}
    for path in every_page():
        resp = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-hans")
        assert resp.status_code in (200, 404), (path, resp.status_code)
        page = resp.content.decode()
        assert 'lang="zh-hans"' in page or 'lang="zh-Hans"' in page, path
        found = english_words(page, allowed)
        if found:
            problems[path] = dict(found)
    report = "\n".join(
        f"{path}: " + "; ".join(f"{w} ← {ctx[0]!r}" for w, ctx in words.items()) for path, words in problems.items()
    )
    assert not problems, "English words on pages shown in Chinese:\n" + report
