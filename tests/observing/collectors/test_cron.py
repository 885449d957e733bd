"""Crontabs: the parser on the formats cron reads, and the cron source on a captured tree."""

import os

from harness.etc_files import data_target, write

from vacate.observing.collectors.configured import cron
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.host import Host
from vacate.observing.model.mount import Mount, Target
from vacate.observing.parsers import crontab

SYSTEM = """\
# /etc/crontab: system-wide crontab
SHELL=/bin/sh
PATH = /usr/local/sbin:/usr/local/bin:/data/bin
MAILTO=""
17 *	* * *	root    cd / && run-parts --report /etc/cron.hourly
*/5 1-3 * jan,feb mon-fri  ml  /data/venv/bin/python /srv/job.py --out /data/out % stdin
@reboot  ml  /data/bin/warm-cache
bad line here
"""






def test_parse_system_crontab():
    lines, warnings = crontab.parse(SYSTEM, system=True)
    jobs = [x for x in lines if x.kind == "job"]
    envs = [x.command for x in lines if x.kind == "env"]
    assert envs == ["SHELL=/bin/sh", "PATH=/usr/local/sbin:/usr/local/bin:/data/bin", "MAILTO="]
    assert [(j.line, j.schedule, j.user) for j in jobs] == [
        (5, "17 * * * *", "root"), (6, "*/5 1-3 * jan,feb mon-fri", "ml"), (7, "@reboot", "ml")]
    assert jobs[1].command.startswith("/data/venv/bin/python /srv/job.py")
    assert len(warnings) == 1 and "line 8" in warnings[0]


def test_parse_user_crontab_and_anacrontab():
    lines, _w = crontab.parse("0 2 * * * /data/backup.sh >/dev/null\n", system=False)
    assert [(x.user, x.command) for x in lines] == [(None, "/data/backup.sh >/dev/null")]
    ana = "SHELL=/bin/sh\n1\t5\tcron.daily\trun-parts /etc/cron.daily\n@monthly 15 m /data/m.sh\n"
    lines, warnings = crontab.parse_anacrontab(ana)
    assert [(x.kind, x.schedule) for x in lines] == [
        ("env", ""), ("job", "1 5 cron.daily"), ("job", "@monthly 15 m")]
    assert warnings == ()


def test_cron_source_finds_every_kind_of_table(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/crontab", SYSTEM)
    write(root, "/etc/cron.d/backup",
          "MAILTO=root\n30 4 * * * root PGPASSWORD=hunter2 pg_dump -f /data/db.sql app\n")
    write(root, "/etc/cron.d/unrelated", "0 * * * * root /usr/bin/true\n")
    write(root, "/var/spool/cron/crontabs/ml", "# m h dom mon dow command\n"
                                               "0 3 * * * /data/eagle3/train.sh\n")
    write(root, "/etc/anacrontab", "7 10 weekly.data /data/bin/weekly\n")
    write(root, "/etc/cron.daily/prune", "#!/bin/sh\n# /data/old\nfind /data/tmp -delete\n", 0o755)
    host = Host.under(root)
    t = data_target()
    consumers, problems = cron.collect(host, t, host_view(t))
    assert problems == ()
    by_id = {c.id: c for c in consumers}
    assert set(by_id) == {
        "cron:/etc/crontab:3", "cron:/etc/crontab:6", "cron:/etc/crontab:7",
        "cron:/etc/cron.d/backup:2", "cron:/var/spool/cron/crontabs/ml:2",
        "cron:/etc/anacrontab:1", "cron:/etc/cron.daily/prune:3"}
    job = by_id["cron:/etc/crontab:6"]
    assert job.type == "cron" and job.live is False
    assert job.attrs.user == "ml" and job.attrs.schedule == "*/5 1-3 * jan,feb mon-fri"
    assert job.paths == ("/data/out", "/data/venv/bin/python")
    assert by_id["cron:/var/spool/cron/crontabs/ml:2"].attrs.user == "ml"
    backup = by_id["cron:/etc/cron.d/backup:2"]
    assert "hunter2" not in backup.name and all("hunter2" not in e.detail for e in backup.evidence)
    assert backup.evidence[0].source == "/etc/cron.d/backup:2"


def test_unreadable_crontab_blocks_the_verdict(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "etc/crontab"))      # a directory where a file should be
    t = data_target()
    consumers, problems = cron.collect(Host.under(root), t, host_view(t))
    assert consumers == ()
    assert [p.code for p in problems] == ["unreadable-config"] and problems[0].blocks_verdict


MAN_DB = """\
#!/bin/sh
if [ -d /run/systemd/system ]; then
  start-stop-daemon --start --pidfile /dev/null --startas /bin/sh \\
    --oknodo --chuid man -- -c /usr/bin/mandb >/dev/null 2>&1
fi
"""


def root_target():
    """The volume is / (check may audit it), with devtmpfs mounted at /dev below it."""
    m = Mount(1, 0, 8, 1, "/", "/", ("rw",), (), "ext4", "/dev/sda1", ())
    dev = Mount(20, 1, 0, 5, "/", "/dev", ("rw",), (), "devtmpfs", "udev", ())
    return Target("/", m, 0, None, None, None, True, "", None, (dev,), ())


def test_a_run_parts_script_names_no_piece_of_a_path_nor_another_filesystem(tmp_path):
    """/etc/cron.daily/man-db as Debian ships it: /dev/null is on devtmpfs (not the volume),
    /null is a piece of /dev/null (not a path of that line); /usr/bin/mandb is on it."""
    root = str(tmp_path)
    write(root, "/etc/cron.daily/man-db", MAN_DB, 0o755)
    host = Host.under(root)
    t = root_target()
    consumers, _problems = cron.collect(host, t, host_view(t))
    paths = {p for c in consumers for p in c.paths}
    assert "/dev/null" not in paths and "/null" not in paths, paths
    assert "/usr/bin/mandb" in paths and "/bin/sh" in paths


def test_check_of_the_root_filesystem_blames_no_dev_null():
    """Through the real command, where the machine has Debian's man-db cron script."""
    import json

    import pytest
    from harness.retire import cli

    if not os.path.exists("/etc/cron.daily/man-db"):
        pytest.skip("no /etc/cron.daily/man-db here")
    _rc, out, _err = cli("check", "/", "--no-scan", "--json")
    doc = json.loads(out)
    for c in doc["consumers"]:
        if c["type"] == "cron":
            assert not {"/dev/null", "/null"} & set(c["paths"]), c
