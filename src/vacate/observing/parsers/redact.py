"""Secrets never leave the machine: one rule that masks what looks like a password or a token in
text vacate collects (config lines, command lines, notes), applied where the text is collected.

What is masked (each value replaced by :data:`MASK`, the quotes around it kept):

* values of names that say they hold a secret (:func:`is_secret_name`: ending in ``PASS``,
  ``PASSWD``, ``PASSWORD``, ``PWD``, ``SECRET``, ``TOKEN``, ``KEY``, ``CREDENTIALS``, ``AUTH``,
  ..., any case, or holding ``password``/``secret``), in every key form: ``NAME=value``
  (shell, systemd ``Environment=``, ``.env``, mount options ``a=1,password=x``, URL queries
  ``?token=x&a=1``), ``"NAME=value with spaces"``, ``"name": "value"`` (JSON), ``name: value``
  (YAML, headers), ``name = value`` (INI), ``--name=value``, ``--name value``, ``"--name"='v'``;
* password options of command lines: ``-pVALUE``/``-p VALUE`` (mysql, sshpass; elsewhere a
  ``-p`` value that is not a path, a port or a number), redis-cli's ``-a V``, ldap tools'
  ``-w V``, the password part of ``-u user:pass``/``--user user:pass`` (curl), ``-U user%pass``
  (smbclient) and ``-u user,pass`` (lftp), openssl's ``pass:V``;
* directives at the start of a line whose name says secret (``requirepass V``,
  ``masterauth V``) and .netrc's ``machine H login U password V``;
* authorization headers (``Authorization: Bearer V``, ``-H "Authorization: Basic V"``,
  ``Proxy-Authorization``, ``Cookie``);
* the password in URL userinfo (``scheme://user:pass@host``);
* well-known token shapes wherever they stand (``hf_…``, ``ghp_…``/``gho_…``/``github_pat_…``,
  ``glpat-…``, ``AKIA…``/``ASIA…``, ``sk-…``/``sk_live_…``, ``xox[bp]-…``, ``AIza…``,
  ``npm_…``, ``pypi-…``, JWTs) — but never as part of a path (``/data/hf_cache``,
  ``/data/hf_0123…``: a shape must not follow ``/`` or a word character).

Text only: path fields are data and are never passed through here. Pure, standard library
only.
"""

from __future__ import annotations

import re

MASK = "<redacted>"
MAX_SHOWN = 300      # characters of collected text kept in evidence and notes

# names whose value is a secret: by how they end (API_KEY, PGPASSWORD, HF_TOKEN, REDIS_PASS,
# MYSQL_PWD, GOOGLE_CREDENTIALS, --passin), or holding an unambiguous word (SECRET_KEY_BASE)
_SECRET_END = re.compile(
    r"(?i)(pass|passwd|password|passphrase|pwd|pw|passin|passout|secret|token|key|keys|"
    r"credential|credentials|auth|cookie|session|signature|apikey)$")
_SECRET_WORD = re.compile(r"(?i)(password|passwd|secret|private[_-]?key)")
# ...unless the name says the value is where a secret is kept, or is plainly no secret
_NOT_SECRET = re.compile(
    r"(?i)(^(old)?pwd$|^author|[_.-](file|path|dir|filename|sock|socket|length|len|type|id|"
    r"name|url|uri|mode|size|count)$|^(monkey|hotkey|turnkey)$|"
    r"^(load|import)credential(encrypted)?$)")     # systemd: ID:PATH and a glob, no secret
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
# what follows the , or & that ends a value: the next mount option, the next query parameter
_NEXT_OPTION = re.compile(_NAME + r"(?:=|,|\s|$)")
_NEXT_QUERY = re.compile(_NAME + r"=")
# a key and the operator after it: NAME=, "NAME"=, "NAME":, NAME:, NAME =, --NAME=
_KEY_OP = re.compile(
    r"(?<![A-Za-z0-9_.\-/~%@])(?P<q0>[\"']?)(?P<key>-{0,2}" + _NAME + r")(?P<q1>[\"']?)"
    r"[ \t]*(?P<op>=|:(?!//))[ \t]*")
# a dashed option then whitespace (its value is the next word): --token V, "--token" 'V'
_OPT_SPACE = re.compile(
    r"(?<![A-Za-z0-9_.\-/~])(?P<q0>[\"']?)(?P<opt>--?[A-Za-z][A-Za-z0-9_-]*)(?P=q0)[ \t]+"
    r"(?=[^\s-])")
# a short option with its value attached: -pSECRET, -uuser:pass, -Uuser%pass
_OPT_ATTACHED = re.compile(
    r"(?<![A-Za-z0-9_.\-/~])-(?P<o>[puUaw])"
    r"(?P<v>\"(?:[^\"\\]|\\.)*\"?|'[^']*'?|[^\s\"'=-][^\s\"']*)")
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(?P<q0>[\"']?)(?:proxy-)?(?:authorization|cookie)(?P<q1>[\"']?)"
    r"(?:[ \t]*[:=][ \t]*|[ \t]+(?=[\"']))")
_AUTH_SCHEME = re.compile(
    r"(?i)(bearer|basic|token|digest|negotiate|ntlm|bot|apikey|aws4-hmac-sha256|hoba|mutual)"
    r"[ \t]+")
_URL_USERINFO = re.compile(r"(?i)[a-z][a-z0-9+.-]{0,31}://[^/\s:@\"']*:(?P<pw>[^@\s/\"']+)@")
_PASS_ARG = re.compile(r"(?<![A-Za-z0-9_])pass:(?P<v>[^\s\"']+)")
_TOKEN = re.compile(
    r"(?:(?<=://)|(?<![A-Za-z0-9_/.\-]))(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}|"
    r"sk-[A-Za-z0-9_-]{20,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|"
    r"AIza[0-9A-Za-z_-]{30,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{50,}|"
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})(?![A-Za-z0-9_/])")
# the tools whose -p is a password (elsewhere -p is a port, parents, permissions...)
_PASSWORD_P = re.compile(r"(?<![A-Za-z0-9_-])(mysql\w*|mariadb\w*|sshpass)(?![A-Za-z0-9_-])")
# short options that are a password for one family of tools only: -a of redis-cli, -w of ldap*
_TOOL_OPTS = {"-a": re.compile(r"(?<![A-Za-z0-9_-])redis-cli(?![A-Za-z0-9_-])"),
              "-w": re.compile(r"(?<![A-Za-z0-9_-])ldap\w+(?![A-Za-z0-9_-])")}
# a directive at the start of a line, the value after blanks: redis.conf's "requirepass V",
# "masterauth V"; .netrc's "... password V"
_DIRECTIVE = re.compile(r"^[ \t]*(?P<key>[A-Za-z_][A-Za-z0-9_-]*)[ \t]+(?=[^\s=:-])",
                        re.MULTILINE)
_COMMANDS = frozenset({"sshpass", "passwd", "gpasswd", "chpasswd", "keepass", "pass"})
_NETRC = re.compile(
    r"(?<![A-Za-z0-9_-])(?:machine|login)[ \t]+\S+[^\n]{0,200}?\bpassword[ \t]+(?=\S)")
# what a -p value is when it is no password: a path, a port or address, a flag, a variable
_NOT_P_VALUE = re.compile(r"^([/.~$%-]|[0-9.:]+(/(tcp|udp|sctp))?$)")
_USER_OPTS = frozenset({"-u", "--user", "-U", "--proxy-user", "--http-user", "--username"})
# find's primaries and compiler flags that start like -pVALUE
_NOT_P_ATTACHED = re.compile(r"^(ath|erm|rint0?|rintf|rune|ipe|thread|edantic|ie|g|rofile|e|i)$")
_PATH_LIKE = re.compile(r"^(/|\./|\.\./|~/|\$)")
_UID_GID = re.compile(r"^\d+(:\d+)?$")


def is_secret_name(name: str) -> bool:
    """Whether a variable, key or option name says its value is a secret."""
    n = name.strip("-\"' ")
    if not n or _NOT_SECRET.search(n):
        return False
    return bool(_SECRET_END.search(n) or _SECRET_WORD.search(n))


def _quoted_end(text: str, i: int) -> int:
    """The index of the quote closing the one at ``text[i]`` (``len(text)`` when none)."""
    q = text[i]
    j = i + 1
    while j < len(text):
        if text[j] == "\\" and q == '"':
            j += 2
            continue
        if text[j] == q:
            return j
        j += 1
    return len(text)


def _word_end(text: str, i: int, *, lists: bool) -> int:
    """The end of an unquoted value starting at ``text[i]``: whitespace, ``;``, a quote or a
    closing bracket ends it; with ``lists``, so does a ``,`` or ``&`` that starts the next
    ``name=`` of an option list or a query string. A backslash keeps the next character."""
    j = i
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\" and j + 1 < n:
            j += 2
            continue
        if c in " \t\r\n;\"'}])>":
            break
        if lists and c == "," and _NEXT_OPTION.match(text, j + 1):
            break
        if lists and c == "&" and _NEXT_QUERY.match(text, j + 1):
            break
        j += 1
    return j


def _value_span(text: str, i: int, *, until: str = "", lists: bool = True
                ) -> tuple[int, int] | None:
    """The span of the value that starts at ``text[i]`` (inside its quotes when quoted);
    ``until``: the quote that opened the assignment (``"NAME=value with spaces"``)."""
    if i >= len(text):
        return None
    if until:
        j = text.find(until, i)
        return (i, len(text) if j < 0 else j) if (j < 0 or j > i) else None
    if text[i] in "\"'":
        j = _quoted_end(text, i)
        return (i + 1, j) if j > i + 1 else None
    j = _word_end(text, i, lists=lists)
    return (i, j) if j > i else None


def _assignments(text: str, spans: list[tuple[int, int]]) -> None:
    masked = 0          # the end of the last value masked: a key inside it is masked already
    for m in _KEY_OP.finditer(text):   # (and looking at it again made "pass:pass:..." n^2)
        if m.start() < masked:
            continue
        key = m.group("key")
        if not is_secret_name(key):
            continue
        q0, q1 = m.group("q0"), m.group("q1")
        # "NAME=value with spaces": the value runs to the quote that opened the word
        until = q0 if q0 and not q1 and m.group("op") == "=" else ""
        span = _value_span(text, m.end(), until=until)
        if span is None:
            continue
        if m.group("op") == ":" and not q1 and text.startswith("/", span[0]):
            continue       # ID:PATH, SRC:DST (LoadCredential=key:/data/k, -v /a/key:/b)
        spans.append(span)
        masked = span[1]


def _options(text: str, spans: list[tuple[int, int]]) -> None:
    tools = [m.end() for m in _PASSWORD_P.finditer(text)]
    tool_opts = {o for o, tool in _TOOL_OPTS.items() if tool.search(text)}
    last_p = -1
    for m in _OPT_SPACE.finditer(text):
        opt = m.group("opt")
        span = _value_span(text, m.end(), lists=False)
        if span is None:
            continue
        value = text[span[0]:span[1]]
        # mysql's or sshpass's own -p: the first -p after the tool's name
        own = opt == "-p" and any(last_p < t < m.start() for t in tools)
        if opt == "-p":
            last_p = m.start()
        password = opt == "-p" and not _PATH_LIKE.match(value) and (
            own or not _NOT_P_VALUE.match(value))
        if password or is_secret_name(opt) or opt in tool_opts:
            spans.append(span)
        elif opt in _USER_OPTS:
            _user_password(text, span, spans)
    for m in _OPT_ATTACHED.finditer(text):
        o, v = m.group("o"), m.group("v")
        span = m.span("v")
        if v[0] in "\"'":                     # -p'quoted pw': inside the quotes
            span = (span[0] + 1, span[1] - (1 if len(v) > 1 and v.endswith(v[0]) else 0))
        if o == "p" and (tools or not (_NOT_P_ATTACHED.match(v) or v.isdigit())):
            spans.append(span)
        elif o in "uU":
            _user_password(text, span, spans)
        elif "-" + o in tool_opts:
            spans.append(span)
    for m in _DIRECTIVE.finditer(text):
        if m.group("key") in _COMMANDS or not is_secret_name(m.group("key")):
            continue
        if span := _value_span(text, m.end(), lists=False):
            spans.append(span)
    for m in _NETRC.finditer(text):
        if span := _value_span(text, m.end(), lists=False):
            spans.append(span)


def _user_password(text: str, span: tuple[int, int], spans: list[tuple[int, int]]) -> None:
    """``user:password`` (curl) or ``user%password`` (smbclient): the password part."""
    value = text[span[0]:span[1]]
    if _UID_GID.match(value) or "://" in value:
        return                             # docker run -u 1000:1000; a URL has its own rule
    for sep in (":", "%", ","):           # curl, smbclient, lftp
        k = value.find(sep)
        if k >= 0 and k + 1 < len(value):
            spans.append((span[0] + k + 1, span[1]))
            return


def _headers(text: str, spans: list[tuple[int, int]]) -> None:
    for m in _AUTH_HEADER.finditer(text):
        i = m.end()
        if m.group("q1") and not m.group("q0"):
            continue                       # 'authorization' as a quoted word of prose
        opener = m.group("q0") if m.group("q0") and not m.group("q1") else ""
        if opener:                         # -H "Authorization: Bearer V": up to the quote
            j = text.find(opener, i)
            span = (i, len(text) if j < 0 else j)
        elif i < len(text) and text[i] in "\"'":
            span = (i + 1, _quoted_end(text, i))
        else:
            s = _AUTH_SCHEME.match(text, i)
            start = s.end() if s else i
            span = (start, _word_end(text, start, lists=False))
        if span[1] > span[0]:
            spans.append(span)


def _shapes(text: str, spans: list[tuple[int, int]]) -> None:
    spans.extend(m.span("pw") for m in _URL_USERINFO.finditer(text))
    spans.extend(m.span("v") for m in _PASS_ARG.finditer(text))
    spans.extend(m.span() for m in _TOKEN.finditer(text))


def redact_text(text: str) -> str:
    """``text`` with every secret the rule knows masked (see the module's docstring)."""
    if not text:
        return text
    spans: list[tuple[int, int]] = []
    _assignments(text, spans)
    _options(text, spans)
    _headers(text, spans)
    _shapes(text, spans)
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        if end <= pos or text.startswith(MASK[:-1], start):
            continue                       # already masked: redacting twice changes nothing
        start = max(start, pos)
        out.append(text[pos:start])
        out.append(MASK)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact_value(name: str, value: str) -> str:
    """The value of ``name=value`` as it may be shown."""
    if is_secret_name(name):
        return MASK
    return redact_text(value)


def bound(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters, the cut said (``…[+N chars]``)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[+{len(text) - limit} chars]"


def shown_text(text: str, limit: int = MAX_SHOWN) -> str:
    """Collected text as it may be kept: secrets redacted, then cut to ``limit``. Only the
    start is redacted (four times what is kept, so a secret that runs across the cut is seen
    whole): a line of megabytes costs no more than a short one."""
    if len(text) <= limit:
        return redact_text(text)
    shown = redact_text(text[:limit * 4])[:limit]
    return f"{shown}…[+{len(text) - len(shown)} chars]"
