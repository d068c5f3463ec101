"""The smaller things a new admin met in the first hour (issue 34, point 8), with the Django test client:
the audit log links its claims, names actions in words and sorts; the release button counts in the
language's plural; /favicon.ico is no 404; the API docs lead back; the preview's Namespace field shows
the YAML's namespace; the pod list says why its GPU utilization column is empty; timestamps in one
format; the history charts get their legend names in the page's language."""

import json
import re

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone, translation

from claims.models import ACTION_TITLES, AuditEntry
from mirror import roles
from monitoring.models import PrometheusSource
from tests.conftest import runs_previews
from tests.ui_fixtures import load_fleet, make_user

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def alpha():
    return load_fleet()


def _entry(cluster, action, outcome="done", claim="claim-a", namespace="team-a", minutes_ago=0):
    entry = AuditEntry.objects.create(
        cluster=cluster,
        cluster_name=cluster.name,
        username="olivia",
        namespace=namespace,
        claim_name=claim,
        action=action,
        outcome=outcome,
    )
    AuditEntry.objects.filter(pk=entry.pk).update(at=timezone.now() - timezone.timedelta(minutes=minutes_ago))
    return entry


def _rows(body):
    return re.findall(r'<tr id="audit-(\d+)"', body)


def test_audit_log_links_claims_names_actions_and_sorts(client, alpha):
    a = _entry(alpha, "remove_reservations", claim="zeta", minutes_ago=5)
    b = _entry(alpha, "deallocate", outcome="refused", claim="alpha", minutes_ago=1)
    client.force_login(make_user("ada", role=roles.ADMIN))
    body = client.get(reverse("ops:audit")).content.decode()
    assert _rows(body) == [str(b.id), str(a.id)]  # newest first
    assert f'href="{reverse("claims:claim-detail", args=["alpha", "team-a", "zeta"])}"' in body
    assert f'<td data-action="remove_reservations">{ACTION_TITLES["remove_reservations"]}' in body
    assert ">remove_reservations<" not in body
    # The filter's options name actions in words and keep the keys as values.
    assert f'<option value="deallocate">{ACTION_TITLES["deallocate"]}</option>' in body
    by_claim = client.get(reverse("ops:audit"), {"ordering": "claim"}).content.decode()
    assert _rows(by_claim) == [str(b.id), str(a.id)]  # alpha before zeta
    assert 'aria-sort="ascending" data-sort="claim"' in by_claim
    assert _rows(client.get(reverse("ops:audit"), {"ordering": "-claim"}).content.decode()) == [str(a.id), str(b.id)]
    oldest = client.get(reverse("ops:audit"), {"ordering": "at"}).content.decode()
    assert _rows(oldest) == [str(a.id), str(b.id)]
    bad = client.get(reverse("ops:audit"), {"ordering": "password"}).content.decode()
    assert 'id="sort-error"' in bad and _rows(bad) == [str(b.id), str(a.id)]
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    zh = client.get(reverse("ops:audit")).content.decode()
    with translation.override("zh-hans"):
        assert f'<td data-action="deallocate">{ACTION_TITLES["deallocate"]}' in zh
        assert str(ACTION_TITLES["deallocate"]) != "Deallocate (clear status.allocation)"


def test_release_button_counts_in_the_languages_plural():
    from django.template import Context, Template

    tpl = Template(
        "{% load i18n %}{% blocktranslate count counter=n trimmed %}Release {{ counter }} claim…"
        "{% plural %}Release {{ counter }} claims…{% endblocktranslate %}"
    )
    assert tpl.render(Context({"n": 1})) == "Release 1 claim…"
    assert tpl.render(Context({"n": 3})) == "Release 3 claims…"
    with translation.override("zh-hans"):
        assert tpl.render(Context({"n": 3})) == "释放 3 个申领…"
    page = (settings.BASE_DIR / "templates/claims/stuck_release.html").read_text()
    assert "claim(s)" not in page and "Release {{ counter }} claims…" in page
    assert '<button value="cancel" class="secondary">' in page  # Send stays the one primary button


def test_favicon_is_served_and_linked(client, alpha):
    answer = client.get("/favicon.ico")
    assert answer.status_code == 301 and answer["Location"].endswith("gpudash/favicon.svg")
    client.force_login(make_user("fay"))
    assert 'rel="icon" href="/static/gpudash/favicon.svg"' in client.get("/").content.decode()
    assert (settings.BASE_DIR / "static/gpudash/favicon.svg").read_text().startswith("<svg")


def test_api_docs_lead_back_to_the_dashboard(client, alpha):
    client.force_login(make_user("dora"))
    body = client.get(reverse("api-docs")).content.decode()
    assert re.search(r'<nav id="api-docs-back"[^>]*><a href="/">← Back to the dashboard</a>', body)
    assert 'id="swagger-ui"' in body  # the docs themselves still there


@runs_previews  # the page runs the preview (a worker answers; without one it waits out its deadline)
def test_preview_namespace_field_shows_the_yamls_namespace(client, alpha):
    from ops.views_preview import yaml_namespace

    claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: x\n  namespace: team-b\n"
    assert yaml_namespace(claim) == "team-b"
    assert yaml_namespace("kind: ResourceClaim\nmetadata: {name: x}\n") == ""
    assert yaml_namespace("metadata: [unclosed") == ""
    client.force_login(make_user("pia", role=roles.OPERATOR))
    body = client.post(reverse("claims:preview"), {"yaml": claim, "namespace": "default"}).content.decode()
    assert '<input name="namespace" value="team-b"' in body


def test_pod_list_says_why_gpu_utilization_is_empty(client, alpha):
    client.force_login(make_user("uma"))
    body = client.get(reverse("claims:pod-list")).content.decode()
    assert 'id="util-hint"' in body and "no metrics source configured" in body
    source = PrometheusSource.objects.create(cluster=alpha, url="http://prometheus.invalid")
    body = client.get(reverse("claims:pod-list")).content.decode()
    assert "no samples yet" in body
    source.last_minute = timezone.now()
    source.save()
    assert "no samples for these pods" in client.get(reverse("claims:pod-list")).content.decode()


def test_history_series_labels_in_the_pages_language():
    from mirror.templatetags.gpudash_ui import history_series_labels

    with translation.override("zh-hans"):
        labels = json.loads(history_series_labels())
    assert labels["allocated"] == "已分配" and labels["idle"] == "空闲 GPU" and labels["reserved"] == "已预留"


def test_one_timestamp_format(client, alpha):
    from ops.readiness import run_checks

    assert run_checks(alpha, live=False)["checked_at"].endswith("Z")
    for template in ("templates/accounts/profile.html",):
        assert 'date:"c"' not in (settings.BASE_DIR / template).read_text()
