"""Secrets never leave the machine: redact values that look like tokens or passwords.

Used on everything a consumer's evidence quotes (Environment= lines, docker env, crontab lines,
command lines). The text is cut into shell-like words (quotes keep spaces inside a word), and
each ``NAME=value`` word whose name looks secret has its whole value masked, quotes kept in
place; ``--secret-option value`` and ``"secret_key": value`` mask the next word. Credentials in
URLs and well-known token shapes are masked wherever they are. Pure functions, standard library
only.
"""

from __future__ import annotations

import re

MASK = "<redacted>"

# Variable or option names whose value is a secret.
_SECRET_NAME = re.compile(
    r"(?i)(token|secret|passw(or)?d|passwd|pwd|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"credential|auth|_key$|^key$|session|cookie|signature|passphrase)"
)
# Names that match the above but hold no secret (a path, the working directory).
_NOT_SECRET = re.compile(r"(?i)(^(old)?pwd$|^author|(_file|_path|_dir|_filename|_sock)$)")
# Values that are secrets whatever their name (well-known token shapes).
_SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
    r"sk-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
# user:password@ in URLs
_URL_CRED = re.compile(r"(?P<pre>[a-z][a-z0-9+.-]*://[^/\s:@]+:)(?P<pw>[^@\s/]+)(?P<at>@)")
# A shell-like word: unquoted runs, "double" (with backslash escapes) and 'single' quoted runs;
# an unterminated quote runs to the end of the text.
_WORD = re.compile(r"""(?:"(?:[^"\\]|\\.)*(?:"|$)|'[^']*(?:'|$)|\\.|[^\s"'\\]+|\\$)+""", re.DOTALL)
# NAME=rest inside one word, the word possibly opening with a quote.
_ASSIGN = re.compile(r"""^(?P<q>["']?)(?P<key>(?:--?)?[A-Za-z_][A-Za-z0-9_.-]*)=(?P<rest>.*)$""",
                     re.DOTALL)
# "--secret-opt" or "secret_key": / secret_key: (the value is the next word)
_KEY_ONLY = re.compile(
    r"""^[{\[(,]*(?P<q>["']?)(?P<key>(?:--?)?[A-Za-z_][A-Za-z0-9_.-]*)(?P=q):?$""")
# "secret_key":"value" in one word (JSON without spaces)
_KEY_COLON = re.compile(
    r"""^(?P<pre>[{\[(,]*(?P<q>["']?)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q):)(?P<rest>.+)$""")


def is_secret_name(name: str) -> bool:
    n = name.lstrip("-")
    return bool(_SECRET_NAME.search(n)) and not _NOT_SECRET.search(n)


def redact_value(name: str, value: str) -> str:
    """The value of ``name=value`` as it may be shown."""
    if is_secret_name(name):
        return MASK
    return redact_text(value)


def _mask_value(rest: str, q: str) -> str:
    """``rest`` (a secret value, maybe quoted, maybe followed by the word's closing quote)."""
    if q:
        return MASK + (q if rest.endswith(q) else "")
    if len(rest) >= 2 and rest[0] in "\"'" and rest.endswith(rest[0]):
        return rest[0] + MASK + rest[0]
    return MASK


def _word(w: str) -> str:
    m = _ASSIGN.match(w)
    if not m:
        c = _KEY_COLON.match(w)
        if c and is_secret_name(c.group("key")):
            rest = c.group("rest")
            if rest[0] in "\"'":
                end = re.match(r'"(?:[^"\\]|\\.)*"' if rest[0] == '"' else r"'[^']*'", rest)
                if end:
                    return (c.group("pre") + rest[0] + MASK + rest[0]
                            + _word(rest[end.end():]))
            tail = rest[len(rest.rstrip(",;}]")):]
            core = rest[:len(rest) - len(tail)]
            return c.group("pre") + _mask_value(core, "") + tail
        return w
    q, key, rest = m.group("q"), m.group("key"), m.group("rest")
    if is_secret_name(key):
        return f"{q}{key}={_mask_value(rest, q)}"
    if "=" not in rest:
        return w
    # Environment=HF_TOKEN=x, Environment="A=1 B", X="A=1": the value is itself an assignment
    if q and rest.endswith(q):
        return f"{q}{key}={_word(rest[:-1])}{q}"
    return f"{q}{key}={_word(rest)}"


def _words(text: str) -> str:
    out: list[str] = []
    pos = 0
    mask_next = False
    for m in _WORD.finditer(text):
        out.append(text[pos:m.start()])
        w = m.group(0)
        if mask_next:
            tail = w[len(w.rstrip(",;")):]
            core = w[:len(w) - len(tail)]
            q = core[0] if core[:1] in ("\"", "'") and len(core) >= 2 and core.endswith(core[0]) \
                else ""
            out.append(f"{q}{MASK}{q}{tail}")
            mask_next = False
        else:
            k = _KEY_ONLY.match(w)
            if k and is_secret_name(k.group("key")) and (
                    k.group("key").startswith("-") or w.endswith(":")):
                mask_next = True
                out.append(w)
            else:
                out.append(_word(w))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """Redact secrets anywhere in free text: NAME=value with a secret-looking name (quoted
    values with spaces included), option pairs (``--hf-token xyz``, ``--password=xyz``),
    ``"api_key": "xyz"``, credentials in URLs, and well-known token shapes."""
    text = _URL_CRED.sub(lambda m: m.group("pre") + MASK + m.group("at"), text)
    text = _words(text)
    return _SECRET_VALUE.sub(MASK, text)


MAX_SHOWN = 300      # characters of collected text kept in evidence and notes


def bound(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters, the cut said (``…[+N chars]``)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[+{len(text) - limit} chars]"


def shown_text(text: str) -> str:
    """Collected text as it may be kept: secrets redacted, then cut to :data:`MAX_SHOWN`."""
    return bound(redact_text(text))
