"""Finds user-visible English in templates that is not marked for translation (issue 14).

Django has no such check (makemessages only collects what is already marked), so it is written
here: every template is tokenised with Django's own lexer, everything that is not plain text
(variables, tags, translated strings, comments) is blanked out, and the rest is split into HTML
tags and text. Text and the attributes people read (title, placeholder, aria-label, alt, button
values) that still contain words are reported with their line.
"""

import re
from html import unescape
from pathlib import Path

from django.template.base import DebugLexer, TokenType

# Names and acronyms that read the same in every language of the UI: Kubernetes kinds as Kubernetes
# writes them, product names and units. A string made only of these needs no translation.
UNTRANSLATED_TERMS = {
    "gpudash",
    "kubectl",
    "kubernetes",
    "gpu",
    "gpus",
    "mig",
    "nic",
    "nics",
    "cpu",
    "cel",
    "yaml",
    "json",
    "api",
    "rest",
    "openapi",
    "uuid",
    "uid",
    "dra",
    "rbac",
    "oidc",
    "sso",
    "hami",
    "dcgm",
    "prometheus",
    "grafana",
    "resourceclaim",
    "resourceclaims",
    "resourceclaimtemplate",
    "resourceclaimtemplates",
    "resourceslice",
    "resourceslices",
    "deviceclass",
    "deviceclasses",
    "devicetaintrule",
    "pod",
    "pods",
    "vgpu",
    "id",
    "url",
    "ms",
    "gi",
    "mi",
    "gib",
    "mib",
    "w",
    "s",
    "x",
    "utc",
    "iso",
}
READ_ATTRIBUTES = {"title", "placeholder", "aria-label", "alt", "aria-description", "data-confirm"}
_SKIP_BLOCKS = {
    "blocktranslate": "endblocktranslate",
    "blocktrans": "endblocktrans",
    "comment": "endcomment",
    "verbatim": "endverbatim",
}
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def _blank(source):
    """The template with every non-text token (and translated blocks) replaced by spaces, lengths kept."""
    out, skip_until = [], None
    for token in DebugLexer(source).tokenize():
        start, end = token.position
        raw = source[start:end]
        blanked = re.sub(r"[^\n]", " ", raw)
        if skip_until:
            out.append(blanked)
            if token.token_type == TokenType.BLOCK and token.contents.split()[0] == skip_until:
                skip_until = None
            continue
        if token.token_type == TokenType.TEXT:
            out.append(raw)
            continue
        if token.token_type == TokenType.BLOCK:
            name = token.contents.split()[0] if token.contents else ""
            skip_until = _SKIP_BLOCKS.get(name)
        # A placeholder character, so "{{ n }} free" still reads as a text node with "free" in it.
        out.append("\x00" + blanked[1:] if blanked and blanked[0] != "\n" else blanked)
    return "".join(out)


def needs_translation(text):
    words = [w for w in _WORD.findall(text.replace("\x00", " ")) if w.lower() not in UNTRANSLATED_TERMS]
    return bool(words)


# A tag, with quoted attribute values that may hold ">"; comments and doctype.
TAG = re.compile(r"""<(/?)([A-Za-z][\w:-]*)((?:[^>"']|"[^"]*"|'[^']*')*)>|<!--.*?-->|<![^>]*>""", re.S)
ATTR = re.compile(r"""([\w:-]+)\s*=\s*("([^"]*)"|'([^']*)')""")


def _line(text, offset):
    return text.count("\n", 0, offset) + 1


def unmarked_text(path):
    """[(line, text)] of user-visible English in one template that is not marked for translation.

    Plain regular expressions rather than an HTML parser: the blanked template still has template
    tags inside HTML tags (`<option{% if %} selected{% endif %}>`), which a strict parser reads as text.
    """
    blanked = _blank(Path(path).read_text())
    found, raw_element, pos = [], None, 0

    def text_between(start, end):
        piece = blanked[start:end]
        if piece.strip() and needs_translation(piece):
            found.append((_line(blanked, start), " ".join(unescape(piece.replace("\x00", "…")).split())))

    for tag in TAG.finditer(blanked):
        if raw_element is None:
            text_between(pos, tag.start())
        pos = tag.end()
        closing, name = tag.group(1), (tag.group(2) or "").lower()
        if not name:
            continue
        if closing:
            if name == raw_element:
                raw_element = None
            continue
        if name in ("script", "style"):
            raw_element = name
        attrs = {
            m.group(1).lower(): (m.group(3) if m.group(3) is not None else m.group(4))
            for m in ATTR.finditer(tag.group(3))
        }
        if attrs.get("translate") == "no":  # HTML's own mark for content that is not prose (YAML, CEL examples)
            continue
        for attr, value in attrs.items():
            readable = attr in READ_ATTRIBUTES or (
                attr == "value" and name in ("input", "button") and attrs.get("type") in ("submit", "button", "reset")
            )
            if readable and value.strip() and needs_translation(value):
                found.append((_line(blanked, tag.start()), f'{attr}="{" ".join(value.replace(chr(0), "…").split())}"'))
    if raw_element is None:
        text_between(pos, len(blanked))
    return found


def project_templates(root):
    root = Path(root)
    skip = {".venv", "node_modules", ".git", ".data"}
    return sorted(p for p in root.rglob("templates/**/*.html") if not skip & set(p.relative_to(root).parts))
