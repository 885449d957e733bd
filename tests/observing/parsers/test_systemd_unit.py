"""The unit-file parser on real unit files (tests/fixtures/systemd) and on systemd's own rules."""

import os

import pytest
from harness.paths import FIXTURES

from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.parsers import systemd_unit as su

SYSD = os.path.join(FIXTURES, "systemd")
DATA = VolumeView("host", (("/data", "/data"),))


def fixture(name):
    with open(os.path.join(SYSD, name)) as f:
        return f.read()


def load(name, text, dropins=()):
    return su.load(name, (f"/etc/systemd/system/{name}", text), tuple(dropins))


SYSTEM = su.Context()


def hits(unit, env=None, ctx=SYSTEM):
    out = []
    for r in su.references(unit, ctx, env if env is not None else su.environment(unit, ctx)):
        found = [(r.text, DATA.to_host(r.text))] if r.is_path else DATA.paths_in_text(r.text)
        out += [(r.key, h, r.assignment.line) for _s, h in found if h]
    return out


def test_every_fixture_parses_without_warnings_except_the_meson_template():
    names = [n for n in sorted(os.listdir(SYSD)) if "." in n and n != "SOURCE.txt"]
    assert len(names) >= 15
    for n in names:
        assigns, warnings = su.parse(fixture(n), n)
        assert assigns, n
        if n.endswith(".in"):
            assert any("@SERVICE_WATCHDOG@" in w for w in warnings)
        else:
            assert warnings == (), n


def test_specifiers_as_systemds_own_test_expects():
    """exec-specifier.service is systemd's test: each `test A = B` line must hold."""
    unit = load("exec-specifier.service", fixture("systemd-test-exec-specifier.service"))
    checked = 0
    for a in unit.values("Service", "ExecStart"):
        v = su.expand_specifiers(a.value, unit.name, su.Context(), unit.fragment)
        (cmd,) = su.parse_exec(v)
        if cmd.path == "test" and len(cmd.argv) == 4 and "$" not in v:
            assert cmd.argv[1] == cmd.argv[3], a.text
            checked += 1
    assert checked >= 9        # %n %N %p %P %f %t %S %C %L %U


def test_instance_specifiers_and_unescaping():
    ctx = su.Context()
    name = "vllm@data-models-qwen\\x2d3.service"
    assert su.expand_specifiers("%i|%I|%f|%p|%n", name, ctx) == \
        "data-models-qwen\\x2d3|data/models/qwen-3|/data/models/qwen-3|vllm|" + name
    assert su.expand_specifiers("%h %t %S %%i %q", "x.service", ctx) == "/root /run /var/lib %i %q"
    user = su.Context(user_manager=True, user="ml", uid=1000, home="/home/ml")
    assert su.expand_specifiers("%h/%t/%S/%C", "x.service", user) == \
        "/home/ml//run/user/1000//home/ml/.local/state//home/ml/.cache"


def test_path_escape_round_trip():
    for p in ("/data", "/data/models/qwen-3", "/srv/a b", "/data/.hidden"):
        assert su.path_unescape(su.path_escape(p)) == p
    assert su.path_escape("/data/my-vol") == "data-my\\x2dvol"


def test_continuation_comments_and_empty_reset():
    text = (
        "[Service]\n"
        "ExecStart=/data/bin/serve \\\n"
        "  # a comment inside the continuation is skipped\n"
        "  --model /data/models/a \\\n"
        "  --port 1\n"
        "Environment=A=/data/a\n"
        "Environment=\n"
        "Environment=B=/data/b\n"
        "WorkingDirectory=/data/old\n"
        "WorkingDirectory=/srv/new\n"
    )
    unit = load("x.service", text)
    (start,) = unit.values("Service", "ExecStart")
    assert start.line == 2
    (cmd,) = su.parse_exec(start.value)
    assert cmd.argv == ("/data/bin/serve", "--model", "/data/models/a", "--port", "1")
    assert [a.value for a in unit.values("Service", "Environment")] == ["B=/data/b"]
    assert [a.value for a in unit.values("Service", "WorkingDirectory")] == ["/srv/new"]
    found = hits(unit)
    assert ("ExecStart", "/data/models/a", 2) in found
    assert not any(h == "/data/old" or h == "/data/a" for _k, h, _l in found)


def test_dropins_override_and_reset_exec_start():
    base = "[Service]\nExecStart=/usr/bin/ollama serve\nEnvironment=OLLAMA_MODELS=/srv/m\n"
    d1 = ("/etc/systemd/system/ollama.service.d/10-models.conf",
          "[Service]\nEnvironment=OLLAMA_MODELS=/data/ollama\n")
    d2 = ("/etc/systemd/system/ollama.service.d/override.conf",
          "[Service]\nExecStart=\nExecStart=/data/bin/ollama serve\n")
    unit = load("ollama.service", base, (d1, d2))
    assert [a.value for a in unit.values("Service", "ExecStart")] == ["/data/bin/ollama serve"]
    assert su.environment(unit, su.Context())["OLLAMA_MODELS"] == "/data/ollama"
    found = {(k, h) for k, h, _l in hits(unit)}
    assert found == {("ExecStart", "/data/bin/ollama"), ("Environment OLLAMA_MODELS", "/data/ollama")}


def test_real_dropin_from_systemctl_edit_buffer():
    assigns, warnings = su.parse(fixture("dropins/ollama-override-systemctl-edit-buffer.conf"), "x")
    assert warnings == ()
    assert [(a.key, a.value) for a in assigns] == [("Environment", '"OLLAMA_HOST=0.0.0.0:11434"')]
    assert su.environment_assignments(assigns[0].value) == [("OLLAMA_HOST", "0.0.0.0:11434")]


def test_exec_prefixes_quoting_and_variables():
    env = {"ARGS": "--model-path /data/models/x  --tp 4", "DIR": "/data/d"}
    v = ("-@/data/bin/real argv0 \"a b\" 'c d' \\x41 ${DIR}/f $ARGS $$HOME ; "
         "!!/bin/echo x\\;y ; :/bin/echo ${DIR}")
    c1, c2, c3 = su.parse_exec(v, env)
    assert (c1.prefixes, c1.path) == ("-@", "/data/bin/real")
    assert c1.argv == ("argv0", "a b", "c d", "A", "/data/d/f", "--model-path", "/data/models/x",
                       "--tp", "4", "$HOME")
    assert c1.ignore_failure
    assert (c2.prefixes, c2.argv) == ("!!", ("/bin/echo", "x;y"))
    assert (c3.prefixes, c3.argv) == (":", ("/bin/echo", "${DIR}"))   # ':' = no expansion


def test_dollar_dollar_in_real_syncoid_unit():
    unit = load("syncoid.service", fixture("off-syncoid.service"))
    (a,) = unit.values("Service", "ExecStart")
    (cmd,) = su.parse_exec(a.value)
    assert cmd.argv[:2] == ("/bin/bash", "-c")
    assert '"${sync_args[@]}"' in cmd.argv[2] and "$(($RESULT + $?))" in cmd.argv[2]
    assert [a.value for a in unit.values("Service", "Environment")] == ["TZ=UTC HOME=/root"]


def test_environment_file_contents_feed_exec_start():
    """aur-sglang.service passes $SGLANG_ARGS from an optional EnvironmentFile."""
    unit = load("sglang.service", fixture("aur-sglang.service"))
    files = su.environment_files(unit, su.Context())
    assert [(p, opt) for p, opt, _a in files] == [("/etc/sglang.conf", True)]
    conf = 'SGLANG_ARGS="--model-path /data/models/Qwen3.5 --tp 4"\n'
    env = su.environment(unit, su.Context(), {"/etc/sglang.conf": conf})
    assert ("ExecStart", "/data/models/Qwen3.5", 14) in hits(unit, env)
    assert hits(unit) == []     # without the file nothing names /data


def test_systemds_environmentfile_test_contents():
    """The values systemd's exec-environmentfile test expects from its env file."""
    from vacate.observing.parsers import envfile
    conf = ("VAR1='word1 word2'\nVAR2=word3 \n# comment1\n\n; comment2\n ; # comment3\n"
            "line without an equal\nVAR3='$word 5 6'\nVAR4='new\nline'\n"
            "VAR5=password\\with\\backslashes")
    assigns, warnings = envfile.parse(conf)
    assert envfile.as_dict(assigns) == {"VAR1": "word1 word2", "VAR2": "word3",
                                        "VAR3": "$word 5 6", "VAR4": "new\nline",
                                        "VAR5": "passwordwithbackslashes"}
    assert len(warnings) == 1 and "line without an equal" in warnings[0]
    unit = load("exec-environmentfile.service",
                fixture("systemd-test-exec-environmentfile.service"))
    (p, optional, _a), = su.environment_files(unit, su.Context())
    assert (p, optional) == ("/tmp/test-exec_environmentfile.conf", False)


def test_bindpaths_and_mount_units():
    unit = load("exec-bindpaths.service", fixture("systemd-test-exec-bindpaths.service"))
    binds = [(r.key, r.text) for r in su.references(unit, su.Context()) if r.key == "BindPaths"]
    assert binds == [("BindPaths", "/tmp"), ("BindPaths", "/tmp/test-exec-bindpaths")]
    m = load("var-lib-machines.mount", fixture("systemd-units-var-lib-machines.mount"))
    refs = {(r.key, r.text) for r in su.references(m, su.Context()) if r.is_path}
    assert {("What", "/var/lib/machines.raw"), ("Where", "/var/lib/machines")} <= refs
    # Where= taken from the unit name when the file has none
    bare = load("data.mount", "[Mount]\nWhat=/dev/vdb\nType=ext4\n")
    assert [(k, h) for k, h, _l in hits(bare)] == [("Where", "/data")]


def test_path_settings_with_prefixes_and_directories():
    text = ("[Unit]\nRequiresMountsFor=/srv \"/data/with space\"\n"
            "ConditionPathExists=!/data/flag\n"
            "[Service]\nWorkingDirectory=-/data/work\nReadWritePaths=-/data/rw +/data/plus\n"
            "StateDirectory=app\nPIDFile=/data/run.pid\nStandardOutput=append:/data/log.txt\n"
            "RootImage=/data/img.raw\nExecStart=/bin/x --out=/data/o,/data/p\n"
            "X-Custom=see /data/custom\n")
    found = {(k, h) for k, h, _l in hits(load("x.service", text))}
    assert found == {
        ("RequiresMountsFor", "/data/with space"), ("ConditionPathExists", "/data/flag"),
        ("WorkingDirectory", "/data/work"), ("ReadWritePaths", "/data/rw"),
        ("ReadWritePaths", "/data/plus"), ("PIDFile", "/data/run.pid"),
        ("StandardOutput", "/data/log.txt"), ("RootImage", "/data/img.raw"),
        ("ExecStart", "/data/o"), ("ExecStart", "/data/p"), ("X-Custom", "/data/custom")}


def test_tilde_is_the_home_of_user_for_the_system_manager():
    unit = load("x.service", "[Service]\nUser=ml\nWorkingDirectory=~\n")
    refs = su.references(unit, su.Context(), {}, {"ml": "/data/home/ml"})
    assert [(r.key, r.text) for r in refs if r.is_path] == [("WorkingDirectory", "/data/home/ml")]
    refs = su.references(unit, su.Context(), {}, {})
    assert [(r.key, r.text) for r in refs if r.is_path] == [("WorkingDirectory", "/root")]


def test_home_tilde_in_working_directory():
    ctx = su.Context(user_manager=True, user="ml", uid=1000, home="/data/home/ml")
    unit = load("x.service", "[Service]\nWorkingDirectory=~\n")
    assert [(k, h) for k, h, _l in hits(unit, ctx=ctx)] == [("WorkingDirectory", "/data/home/ml")]


@pytest.mark.parametrize("text", ["[Service\nExecStart=/x\n", "ExecStart=/data/x\n",
                                  "[Service]\njunk line\n"])
def test_bad_input_is_a_warning_not_a_crash(text):
    _assigns, warnings = su.parse(text, "bad.service")
    assert warnings
