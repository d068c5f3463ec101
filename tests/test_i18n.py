"""The UI in Simplified Chinese (issue 14): every template string is marked, the zh_Hans catalog is
complete (no untranslated or fuzzy entry) and compiled, Accept-Language and the nav's switch pick the
language, and Kubernetes terms stay as Kubernetes writes them."""

import os
import shutil
import subprocess

import polib
import pytest
from django.urls import reverse

from .browser import ROOT
from .template_text import project_templates, unmarked_text
from .ui_fixtures import load_fleet, make_user

CATALOG = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES"
# Kinds and API terms a Chinese UI keeps in Kubernetes' own spelling.
KUBERNETES_TERMS = ["ResourceClaimTemplate", "ResourceClaim", "ResourceSlice", "DeviceClass", "resourceVersion", "NotReady"]


def test_every_template_string_is_marked_for_translation():
    unmarked = {str(p.relative_to(ROOT)): found for p in project_templates(ROOT) if (found := unmarked_text(p))}
    assert not unmarked, "text not marked with {% translate %} / {% blocktranslate %}:\n" + "\n".join(
        f"{path}:{line}: {text}" for path, found in unmarked.items() for line, text in found)


def test_the_marking_check_finds_english_in_text_and_read_attributes(tmp_path):
    template = tmp_path / "page.html"
    template.write_text(
        '{% load i18n %}<p title="Free GPUs">{% translate "Nodes" %}: {{ n }} free</p>\n'
        '<button type="submit" value="{{ v }}">{% translate "Send" %}</button>\n'
        '<textarea translate="no" placeholder="kind: ResourceClaim"></textarea><span>GPU · {{ x }} MiB</span>\n'
        "{% blocktranslate %}Counted {{ n }} times{% endblocktranslate %}<script>var words = 'not text';</script>\n")
    assert unmarked_text(template) == [(1, 'title="Free GPUs"'), (1, "… : … free")]


@pytest.fixture(scope="module")
def fresh_catalog(tmp_path_factory):
    """`make messages` run into a copy of locale/: what the catalog must hold for today's templates and code."""
    if not shutil.which("xgettext") or not shutil.which("msgfmt"):
        pytest.fail("GNU gettext is needed to extract and compile the catalog (apt-get install gettext)")
    locale = tmp_path_factory.mktemp("locale")
    shutil.copytree(ROOT / "locale", locale, dirs_exist_ok=True)
    env = {**os.environ, "GPUDASH_LOCALE_DIR": str(locale)}
    done = subprocess.run(["make", "-s", "messages"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return locale / "zh_Hans" / "LC_MESSAGES"


def test_the_catalog_has_no_untranslated_or_fuzzy_entry(fresh_catalog):
    po = polib.pofile(fresh_catalog / "django.po")
    assert len(po) > 300
    untranslated = [e.msgid for e in po.untranslated_entries()]
    fuzzy = [e.msgid for e in po.fuzzy_entries()]
    assert not untranslated and not fuzzy, f"run `make messages` and translate: untranslated {untranslated}, fuzzy {fuzzy}"


def test_the_committed_catalog_is_the_extracted_one_and_compiled(fresh_catalog):
    committed = polib.pofile(CATALOG / "django.po")
    fresh = polib.pofile(fresh_catalog / "django.po")
    assert {(e.msgid, e.msgid_plural) for e in committed} == {(e.msgid, e.msgid_plural) for e in fresh}
    compiled = {(e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in polib.mofile(CATALOG / "django.mo")}
    written = {(e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in committed.translated_entries()}
    assert compiled == written, "locale/zh_Hans/LC_MESSAGES/django.mo is older than django.po: run `make messages`"


def test_kubernetes_terms_stay_as_kubernetes_writes_them():
    po = polib.pofile(CATALOG / "django.po")
    changed = []
    for entry in po.translated_entries():
        translations = [entry.msgstr] if not entry.msgid_plural else list(entry.msgstr_plural.values())
        for term in KUBERNETES_TERMS:
            if term in entry.msgid and any(term not in t for t in translations):
                changed.append((term, entry.msgid))
    assert not changed


@pytest.mark.django_db
@pytest.mark.sqlite_default
def test_accept_language_and_the_switch_choose_the_language(client):
    load_fleet()
    client.force_login(make_user("lin"))
    overview = reverse("inventory:overview")
    english = client.get(overview, HTTP_ACCEPT_LANGUAGE="en-GB,en;q=0.9").content.decode()
    assert '<html lang="en' in english and ">Overview</a>" in english and "概览" not in english
    chinese = client.get(overview, HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9").content.decode()
    assert '<html lang="zh-hans">' in chinese and ">概览</a>" in chinese and ">节点</a>" in chinese

    switched = client.post(reverse("set_language"), {"language": "zh-hans", "next": overview})
    assert switched.status_code == 302 and switched.url == overview
    assert client.cookies["gpudash_language"].value == "zh-hans"
    # The remembered choice wins over the browser's Accept-Language.
    remembered = client.get(reverse("inventory:node-list"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert ">节点</a>" in remembered and ">Nodes</a>" not in remembered
    client.post(reverse("set_language"), {"language": "en", "next": overview})
    assert ">Nodes</a>" in client.get(reverse("inventory:node-list"), HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
