"""The UI in Simplified Chinese (issue 14): every template string is marked, the zh_Hans catalog is
complete (no untranslated or fuzzy entry) and compiled, Accept-Language and the nav's switch pick the
language, and Kubernetes terms stay as Kubernetes writes them."""

import os
import shutil
import subprocess

import polib
import pytest
from django.urls import reverse

from tests.browser import ROOT
from tests.template_text import project_templates, unmarked_text
from tests.ui_fixtures import load_fleet, make_user

CATALOG = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES"
# Kinds and API terms a Chinese UI keeps in Kubernetes' own spelling.
KUBERNETES_TERMS = [
    "ResourceClaimTemplate",
    "ResourceClaim",
    "ResourceSlice",
    "DeviceClass",
    "resourceVersion",
    "NotReady",
]


def test_every_template_string_is_marked_for_translation():
    unmarked = {str(p.relative_to(ROOT)): found for p in project_templates(ROOT) if (found := unmarked_text(p))}
    assert not unmarked, "text not marked with {% translate %} / {% blocktranslate %}:\n" + "\n".join(
        f"{path}:{line}: {text}" for path, found in unmarked.items() for line, text in found
    )


def test_the_marking_check_finds_english_in_text_and_read_attributes(tmp_path):
    template = tmp_path / "page.html"
    template.write_text(
        '{% load i18n %}<p title="Free GPUs">{% translate "Nodes" %}: {{ n }} free</p>\n'
        '<button type="submit" value="{{ v }}">{% translate "Send" %}</button>\n'
        '<textarea translate="no" placeholder="kind: ResourceClaim"></textarea><span>GPU · {{ x }} MiB</span>\n'
        "{% blocktranslate %}Counted {{ n }} times{% endblocktranslate %}<script>var words = 'not text';</script>\n"
    )
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
    assert not untranslated and not fuzzy, (
        f"run `make messages` and translate: untranslated {untranslated}, fuzzy {fuzzy}"
    )


def test_the_committed_catalog_is_the_extracted_one_and_compiled(fresh_catalog):
    committed = polib.pofile(CATALOG / "django.po")
    fresh = polib.pofile(fresh_catalog / "django.po")
    # Keyed with the context too: one English word may read differently in two places (pgettext).
    assert {(e.msgctxt, e.msgid, e.msgid_plural) for e in committed} == {
        (e.msgctxt, e.msgid, e.msgid_plural) for e in fresh
    }
    compiled = {
        (e.msgctxt, e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in polib.mofile(CATALOG / "django.mo")
    }
    written = {
        (e.msgctxt, e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in committed.translated_entries()
    }
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


# --- Python-side messages -------------------------------------------------------------------------

# Modules whose results users read as sentences, and where each sentence goes: (function, positional
# index, keyword). readiness: item(status, text), check(id, title, items, summary); pending: step(key,
# title, status, detail); stuck and idle: Candidate(rule, claim, subject, summary); release:
# Outcome(outcome, reason) and a plan's refuse(msg), warn(msg), verified(*msgs).
MESSAGE_MODULES = [
    "ops/readiness.py",
    "ops/pending.py",
    "claims/stuck.py",
    "monitoring/idle.py",
    "claims/release/plans.py",
    "claims/release/actions.py",
    "claims/release/audit.py",
]
MESSAGE_ARGUMENTS = {
    "item": [(1, "text")],
    "check": [(1, "title"), (3, "summary")],
    "step": [(1, "title"), (3, "detail")],
    "Candidate": [(3, "summary")],
    "Outcome": [(1, "reason")],
    "refuse": [(0, "msg")],
    "warn": [(0, "msg")],
    "verified": [(0, None), (1, None), (2, None)],
}
# Called as methods (plan.refuse(...)); the others as plain names.
MESSAGE_METHODS = {"refuse", "warn", "verified"}
# Calls whose string argument is marked for translation (a msgid), or is a message built of one.
MARKERS = {"gettext", "gettext_lazy", "gettext_noop", "ngettext", "ngettext_lazy", "pgettext", "_", "message"}


def unmarked_messages(source, filename="<module>"):
    """[(line, text)] of English passed as a user-facing message without gettext: string literals and
    the literal parts of f-strings, followed through `+`, `%`, conditional expressions, str.join's
    separator and local names assigned in the same function. Words that need no translation (Kubernetes kinds, units) pass."""
    import ast

    from tests.template_text import needs_translation

    tree = ast.parse(source, filename)
    found = []

    def visit(node, assigned, seen):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            # A marked msgid; other calls' arguments are data (dict keys, names), but the separator of
            # ", ".join(...) or a literal's .format() is text.
            if name not in MARKERS and isinstance(node.func, ast.Attribute) and name in ("join", "format"):
                visit(node.func.value, assigned, seen)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if needs_translation(node.value):
                found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else " " for v in node.values)
            if needs_translation(text):
                found.append((node.lineno, text))
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    visit(v.value, assigned, seen)
        elif isinstance(node, ast.BinOp):
            visit(node.left, assigned, seen)
            visit(node.right, assigned, seen)
        elif isinstance(node, ast.IfExp):
            visit(node.body, assigned, seen)
            visit(node.orelse, assigned, seen)
        elif isinstance(node, ast.Dict):
            for v in node.values:
                visit(v, assigned, seen)
        elif isinstance(node, ast.Name) and node.id in assigned and node.id not in seen:
            for value in assigned[node.id]:
                visit(value, assigned, seen | {node.id})
        elif isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            visit(node.elt, assigned, seen)

    for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Module))]:
        body = (
            func.body
            if isinstance(func, ast.FunctionDef)
            else [n for n in func.body if not isinstance(n, ast.FunctionDef)]
        )
        assigned = {}
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Assign):
                    for target in n.targets:
                        if isinstance(target, ast.Name):
                            assigned.setdefault(target.id, []).append(n.value)
                        elif isinstance(target, ast.Tuple) and isinstance(n.value, ast.Tuple):
                            for t, v in zip(target.elts, n.value.elts):
                                if isinstance(t, ast.Name):
                                    assigned.setdefault(t.id, []).append(v)
        for stmt in body:
            for call in [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]:
                name = call.func.id if isinstance(call.func, ast.Name) else ""
                if isinstance(call.func, ast.Attribute) and call.func.attr in MESSAGE_METHODS:
                    name = call.func.attr
                for index, keyword in MESSAGE_ARGUMENTS.get(name, []):
                    args = [a for a in call.args if index < len(call.args) and a is call.args[index]]
                    args += [k.value for k in call.keywords if k.arg == keyword]
                    for arg in args:
                        visit(arg, assigned, frozenset())
    return sorted(set(found))


def test_every_python_message_is_marked_for_translation():
    unmarked = {
        path: found for path in MESSAGE_MODULES if (found := unmarked_messages((ROOT / path).read_text(), path))
    }
    assert not unmarked, "user-facing text not passed through gettext:\n" + "\n".join(
        f"{path}:{line}: {text}" for path, found in unmarked.items() for line, text in found
    )


def test_the_message_check_finds_english_in_literals_f_strings_and_names():
    source = """
def rule(node, n):
    why = "no longer exists" if node else gettext("replaced")
    items = [item(PASS, f"Node {node} is {why}"), item(WARN, gettext("Fine: %(n)s") % {"n": ", ".join(n)}),
             item(FAIL, "Kubernetes " + node), item(PASS, gettext("ok") + " trailing words")]
    yield Candidate(RULE, claim, "", message(gettext_noop("Stored %(x)s"), x="ResourceClaim"))
    plan.refuse(message(gettext_noop("Refused.")))
    plan.warn(f"Cluster {node} is read-only.")
    return step("key", gettext("Title"), FAIL, detail="Plain English detail.")

def release(plan):
    plan.verified(message(gettext_noop("checked")), "the allocation is gone")
    return Outcome(REFUSED, "Permission denied.")
"""
    assert unmarked_messages(source) == [
        (3, "no longer exists"),
        (4, "Node   is  "),
        (5, " trailing words"),
        (8, "Cluster   is read-only."),
        (9, "Plain English detail."),
        (12, "the allocation is gone"),
        (13, "Permission denied."),
    ]


@pytest.mark.django_db
@pytest.mark.sqlite_default
def test_the_chinese_pages_show_translated_details(client, settings):
    from claims.models import Finding
    from claims.stuck import detect

    settings.GPUDASH_STUCK = {"DELETION_GRACE": 0}
    cluster = load_fleet()
    detect(cluster)
    blocked = Finding.objects.get(cluster=cluster, rule="deletion_blocked", claim_name="stuck-claim")
    # The stored English stays for the API; the message is rendered again in the reader's language.
    assert blocked.summary.startswith("Deleting since ") and blocked.summary_message["msgid"].startswith(
        "Deleting since"
    )
    client.force_login(make_user("lin"))
    zh = {"HTTP_ACCEPT_LANGUAGE": "zh-CN"}

    stuck = client.get(reverse("ops:stuck"), {"claim_name": "stuck-claim"}, **zh).content.decode()
    assert "删除受阻" in stuck and "删除中，但仍处于已分配状态" in stuck and "先解除分配" in stuck
    assert "but still allocated" not in stuck
    assert (
        f'<span class="badge sev-{blocked.severity}">{ {"warning": "警告", "critical": "严重", "info": "信息"}[blocked.severity] }</span>'
        in stuck
    )
    # Device states and the cluster's connection in the reader's language; their keys stay in URLs and classes.
    overview = client.get(reverse("inventory:overview"), **zh).content.decode()
    assert "已分配" in overview and "空闲" in overview and "节点未就绪" in overview
    assert 'href="/devices/?state=allocated"' in overview and ">allocated <small>" not in overview
    assert '<span class="muted">从未连接' in overview or '<span class="muted">已连接' in overview
    devices = client.get(reverse("inventory:device-list"), {"ordering": "state"}, **zh)
    assert devices.status_code == 200 and '<option value="allocated">已分配</option>' in devices.content.decode()
    # The API keeps the English summary whatever the language.
    listed = client.get(f"/api/v1/findings/{blocked.id}", **zh).json()
    assert listed["summary"] == blocked.summary

    pending = client.get(reverse("ops:pending-pod", args=["alpha", "team-a", "waiting-pod"]), **zh).content.decode()
    assert "未分配：没有节点的设备能满足它" in pending and "Not allocated: no node" not in pending
    # The scheduler's own message stays as the scheduler wrote it.
    assert "0/3 nodes are available" in pending

    readiness = client.get(reverse("ops:readiness"), {"cluster": "alpha"}, **zh).content.decode()
    assert "所有资源池都完整。" in readiness and "Every pool is complete." not in readiness
    english = client.get(reverse("ops:readiness"), {"cluster": "alpha"}, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Every pool is complete." in english


def test_stored_messages_render_in_the_active_language_and_fall_back():
    from django.utils import translation

    from claims.stuck import double_allocation_summary
    from mirror.messages import message, render

    msg = double_allocation_summary("gpu.nvidia.com/node-a/gpu-0", ["a/x", "b/y"])
    english = render(msg, translate=False)
    assert english.startswith("Device gpu.nvidia.com/node-a/gpu-0 is allocated to 2 claims (a/x, b/y)")
    with translation.override("zh-hans"):
        assert (
            render(msg)
            == "设备 gpu.nvidia.com/node-a/gpu-0 在没有管理员访问或共享容量的情况下被分配给了 2 个申领（a/x, b/y）：数据完整性告警。"
        )
        nested = message(
            "%(finding)s Release only once the pods on it are known to be gone.", finding=message("no devices")
        )
        assert render(nested) == "无设备 请在确认其上的 Pod 已经消失后再释放。"
        # An older row (no message) or a message whose placeholders do not fit shows the stored text.
        assert render({}, "stored English") == "stored English"
        assert render(message("Binding failed for %(device)s: %(conditions)s is True."), "stored") == "stored"


def test_counts_are_grouped_in_the_pages_language():
    from django.template import Context, Template
    from django.utils import translation

    template = Template("{% load humanize %}{{ n|intcomma }}|{{ n }}")
    for language in ("en", "zh-hans"):  # Django's own zh_Hans would print 224000 (gpudash/formats/zh_Hans)
        with translation.override(language):
            assert template.render(Context({"n": 224000})) == "224,000|224000"
