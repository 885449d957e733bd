"""Secrets never leave the machine: redact values that look like tokens or passwords.

Used on everything a consumer's evidence quotes (Environment= lines, docker env, crontab lines,
command lines). Pure functions, standard library only.
"""

from __future__ import annotations

import re

MASK = "<redacted>"

# Variable or option names whose value is a secret.
_SECRET_NAME = re.compile(
    r"(?i)(token|secret|passw(or)?d|passwd|pwd|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"credential|auth|_key$|^key$|session|cookie|signature)"
)
# Values that are secrets whatever their name (well-known token shapes).
_SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
    r"sk-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
# NAME=value or --name=value / --name value pairs inside free text.
_ASSIGN = re.compile(r"""(?P<key>(?:--?)?[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>=|\s+)(?P<val>"[^"]*"|'[^']*'|\S+)""")
# user:password@ in URLs
_URL_CRED = re.compile(r"(?P<pre>[a-z][a-z0-9+.-]*://[^/\s:@]+:)(?P<pw>[^@\s/]+)(?P<at>@)")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name.lstrip("-")))


def redact_value(name: str, value: str) -> str:
    """The value of ``name=value`` as it may be shown."""
    if is_secret_name(name):
        return MASK
    return redact_text(value)


def redact_text(text: str) -> str:
    """Redact secrets anywhere in free text: NAME=value with a secret-looking name, option
    pairs (``--hf-token xyz``), credentials in URLs, and well-known token shapes."""
    text = _URL_CRED.sub(lambda m: m.group("pre") + MASK + m.group("at"), text)

    def _assign(m: re.Match) -> str:
        key, val = m.group("key"), m.group("val")
        if not is_secret_name(key):
            if "=" in val:   # Environment=HF_TOKEN=x, "A=1 B=2": look inside the value
                q = val[0] if val[0] in "\"'" else ""
                inner = val[1:-1] if q else val
                return f"{key}{m.group('sep')}{q}{_ASSIGN.sub(_assign, inner)}{q}"
            return m.group(0)
        if m.group("sep") != "=" and not key.startswith("-"):
            return m.group(0)   # "auth something" in prose: only --opt value pairs
        return f"{key}{m.group('sep')}{MASK}"

    text = _ASSIGN.sub(_assign, text)
    return _SECRET_VALUE.sub(MASK, text)
