"""Secrets never leave the machine: real unit files, an environment file, a crontab and an fstab
full of secrets, all naming a real volume; ``vacate check`` (JSON and the table) prints none
of the secret values anywhere, and still shows the paths exactly, the ones shaped like tokens
included (``/data/hf_…``)."""

import json

import pytest
from harness.config_checks import check_text, check_with, unit
from harness.etc_files import write

pytestmark = pytest.mark.root

HF = "hf_" + "Qw3rTy7uIoPaSdFgHjKlZxCvBnM1234567"
SECRETS = ["dbpass-0001", "redispass-0002", "bearer-0003", "cli-pw-0004", "pvalue-0005",
           "quoted-tok-0006", "urlpw-0007", "mysqlpw-0008", HF, "awssecret-0009",
           "cronpw-0010", "cifspw-0011", "apikey-0012", "AKIAQWERTYUIOPASDFGH"]


def stage_secrets(stage: str, vol: str) -> list[str]:
    """The staged configs; returns the volume paths they name that look like tokens."""
    odd = f"{vol}/hf_{'A' * 32}"            # a directory named like a token: a path, kept
    unit(stage, "app.service",
         "[Unit]\nDescription=app with secrets\n[Service]\n"
         "Environment=DB_PASS=dbpass-0001 REDIS_PASS=redispass-0002\n"
         f"EnvironmentFile=/etc/default/app\nWorkingDirectory={vol}/hf_cache\n"
         f'ExecStartPre=/usr/bin/curl -H "Authorization: Bearer bearer-0003" '
         f"-o {vol}/x https://svc:urlpw-0007@models.lan/x\n"
         f"ExecStart={odd}/bin/app --password=cli-pw-0004 -p pvalue-0005 "
         f"\"--token\"='quoted-tok-0006' --api-key apikey-0012 --out {vol}/out\n"
         f"ExecStartPost=/usr/bin/mysql -uroot -pmysqlpw-0008 -e 'source {vol}/init.sql'\n"
         "[Install]\nWantedBy=multi-user.target\n")
    write(stage, "/default/app", f"HF_TOKEN={HF}\nMODEL={vol}/models\n"
          f"AWS_SECRET_ACCESS_KEY=awssecret-0009 CACHE={vol}/aws\n"
          f"AWS_ACCESS_KEY_ID=AKIAQWERTYUIOPASDFGH\nTARGET={vol}/s3\n")
    write(stage, "/cron.d/backup",
          f"0 3 * * * root curl -u admin:cronpw-0010 -T {vol}/db.tgz https://backup.lan/\n")
    write(stage, "/fstab", f"//nas/share {vol}/nas cifs username=svc,password=cifspw-0011,"
          "uid=1000 0 0\n")
    return [f"{vol}/hf_cache", odd]


def test_check_prints_no_secret_and_every_path(ext4_volume, tmp_path):
    stage = str(tmp_path)
    vol = ext4_volume.mountpoint
    odd_paths = stage_secrets(stage, vol)
    rc, doc = check_with(ext4_volume, stage, files=("fstab",))
    out = json.dumps(doc)
    assert rc == 0 or doc["consumers"], out[:2000]
    leaked = [s for s in SECRETS if s in out]
    assert leaked == [], leaked
    ids = {c["id"] for c in doc["consumers"]}
    assert {"systemd-unit:app.service", "config-file:/etc/default/app"} <= ids
    assert any(i.startswith("cron:/etc/cron.d/backup") for i in ids)
    assert any(i.startswith("fstab:/etc/fstab") for i in ids)
    paths = {p for c in doc["consumers"] for p in c["paths"]}
    paths |= {e["path"] for c in doc["consumers"] for e in c["evidence"]}
    for p in odd_paths:
        assert any(x == p or x.startswith(p + "/") for x in paths), (p, sorted(paths))
    assert "<redacted>" in out            # the secrets were seen and masked, not missed
    table = check_text(ext4_volume, stage, files=("fstab",))
    assert table.stdout and [s for s in SECRETS if s in table.stdout + table.stderr] == []
