"""The redaction rule against a corpus of real-world shapes: systemd units, env files, docker,
crontabs, database and HTTP clients, fstab, URLs, JSON/YAML/INI. For each line every secret
value must be gone and the text that is no secret (paths above all) must be intact."""

import pytest

from vacate.observing.parsers.redact import MASK, redact_text, shown_text

HF = "hf_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3x"
GHP = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
AKIA = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SK = "sk-proj-" + "Xy12Ab34Cd56Ef78Gh90Ij12Kl34Mn56"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GLPAT = "glpat-" + "xY9zW8vU7tS6rQ5pO4nM"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
STRIPE = "sk_live_" + "51H8aBcDeFgHiJkLmNoPqRsT"

# (text, secret values that must be gone, text that must stay)
CORPUS = [
    # systemd units
    ("Environment=DB_PASS=hunter2 DB_HOST=db1", ["hunter2"], ["DB_HOST=db1"]),
    ('Environment="REDIS_PASS=r3d1s pw" "REDIS_URL=redis://cache:6379/0"', ["r3d1s", " pw"],
     ["redis://cache:6379/0"]),
    (f"Environment=HF_TOKEN={HF} HF_HOME=/data/hf_cache", [HF], ["HF_HOME=/data/hf_cache"]),
    ("Environment=api_key=abc123def", ["abc123def"], ["Environment=api_key="]),
    ("Environment=MYSQL_PWD=s3cr3t!", ["s3cr3t!"], []),
    ("ExecStart=/usr/bin/mysql -uroot -pPASSWORD123 -h db /data/dump.sql", ["PASSWORD123"],
     ["-uroot", "/data/dump.sql"]),
    ("ExecStart=/data/bin/serve --model-path /data/models/qwen --password=opensesame --port 80",
     ["opensesame"], ["/data/models/qwen", "--port 80"]),
    ("ExecStart=/data/bin/serve --api-key sk-abc-not-a-shape-but-an-option --port 8000",
     ["sk-abc-not-a-shape-but-an-option"], ["/data/bin/serve", "--port 8000"]),
    ("""ExecStart=/data/bin/app "--token"='t0k3n value' --out /data/out""", ["t0k3n", "value'"],
     ["/data/out"]),
    ("""ExecStart=/data/bin/app "--token" "t0k3n" --out /data/out""", ["t0k3n"], ["/data/out"]),
    ("SetCredential=db-password:Sup3rS3cret", ["Sup3rS3cret"], []),
    ("LoadCredential=tls-key:/data/secrets/tls.key", [], ["/data/secrets/tls.key"]),
    # env files
    ("DB_PASSWORD='correct horse battery staple'", ["correct", "horse", "staple"], []),
    ('export AWS_SECRET_ACCESS_KEY="' + AWS_SECRET + '"', [AWS_SECRET], []),
    (f"AWS_ACCESS_KEY_ID={AKIA}", [AKIA], ["AWS_ACCESS_KEY_ID="]),
    (f"OPENAI_API_KEY={SK}", [SK], []),
    ("SECRET_KEY_BASE=9f8e7d6c5b4a", ["9f8e7d6c5b4a"], []),
    ("DJANGO_SECRET_KEY = 'x!y@z#'", ["x!y@z#"], []),
    ("GOOGLE_APPLICATION_CREDENTIALS_FILE=/data/gcp.json", [], ["/data/gcp.json"]),
    ("TOKEN_PATH=/data/tok SSL_KEY_FILE=/data/k.pem PWD=/data/x", [], [
        "/data/tok", "/data/k.pem", "/data/x"]),
    ("hf_token: " + HF, [HF], ["hf_token: "]),
    # docker
    ("Env DB_PASS=pg-secret-1 names /data/pg", ["pg-secret-1"], ["/data/pg"]),
    ("docker run -e POSTGRES_PASSWORD=pgpass -v /data/pg:/var/lib/postgresql/data postgres",
     ["pgpass"], ["/data/pg:/var/lib/postgresql/data"]),
    ('docker run --env "MINIO_ROOT_PASSWORD=mini o" -v /data/minio:/data minio', ["mini o"],
     ["/data/minio:/data"]),
    ("docker login -u bot -p dckr_pat_abcdef registry.example.com", ["dckr_pat_abcdef"],
     ["registry.example.com"]),
    ("docker run -u 1000:1000 -p 8080:80 -v /data/www:/srv nginx", [], [
        "1000:1000", "8080:80", "/data/www:/srv"]),
    # crontabs
    ("0 3 * * * root curl -u admin:adm1nPW https://backup.lan/upload -T /data/db.tgz",
     ["adm1nPW"], ["admin:", "/data/db.tgz"]),
    ("*/5 * * * * ml curl -s -H 'Authorization: Bearer abc.def.ghi' https://api/x -o /data/x",
     ["abc.def.ghi"], ["/data/x"]),
    ('@daily curl -H "Authorization: token ' + GHP + '" https://api.github.com', [GHP], []),
    ("15 2 * * * root PGPASSWORD=pgpw pg_dump -h db -f /data/backup/db.sql", ["pgpw"],
     ["/data/backup/db.sql"]),
    ("0 1 * * * root mysqldump -u backup -p'qu0ted pw' shop > /data/shop.sql", ["qu0ted"],
     ["/data/shop.sql"]),
    ("0 1 * * * root mkdir -p /data/backup && rsync -a /srv/ /data/backup/", [],
     ["mkdir -p /data/backup", "/data/backup/"]),
    ("0 4 * * * root find /data/tmp -path '/data/tmp/keep' -prune -o -print0 | xargs -0 rm",
     [], ["-path '/data/tmp/keep'", "-prune", "-print0"]),
    # database and cache clients
    ("mysql --user=root --password='my pw' -h 127.0.0.1 app", ["my pw"], ["--user=root"]),
    ("mysql -u root -p MyPass123 app", ["MyPass123"], []),
    ('psql "host=db user=app password=psqlpw dbname=app" -f /data/q.sql', ["psqlpw"],
     ["/data/q.sql"]),
    ("psql postgresql://app:pg%40ss@db:5432/app -f /data/q.sql", ["pg%40ss"],
     ["db:5432/app", "/data/q.sql"]),
    ("redis-cli -h cache -a r3dis-pw --rdb /data/dump.rdb", ["r3dis-pw"], ["/data/dump.rdb"]),
    ("redis-cli -u redis://:cachepw@cache:6379/0", ["cachepw"], ["cache:6379/0"]),
    ("mongodump --uri mongodb+srv://admin:m0ng0@cluster0/db --out /data/mongo", ["m0ng0"],
     ["/data/mongo"]),
    ("sshpass -p 123456 ssh -p 2222 backup@nas", ["123456"], ["-p 2222"]),
    ("openssl enc -aes-256-cbc -pass pass:0pensslpw -in /data/x -out /data/x.enc",
     ["0pensslpw"], ["/data/x.enc"]),
    ("smbclient //nas/share -U backup%smbpw -c 'put /data/x'", ["smbpw"], ["backup%"]),
    # fstab and mounts
    ("//nas/share /data/nas cifs username=svc,password=cifspw,uid=1000 0 0", ["cifspw"],
     ["username=svc", "uid=1000", "/data/nas"]),
    ("//nas/share /data/nas cifs credentials=/root/.smbcred,vers=3.0 0 0", [], ["vers=3.0"]),
    ("https://webdav.lan/x /data/dav davfs user=u,pass=davpw,_netdev 0 0", ["davpw"],
     ["_netdev"]),
    # URLs
    ("git clone https://oauth2:" + GLPAT + "@gitlab.com/x/y.git /data/y", [GLPAT], ["/data/y"]),
    ("git clone https://" + GHP + "@github.com/x/y.git", [GHP], ["github.com/x/y.git"]),
    ("https://api.example.com/v1?access_token=qwerty123&limit=10", ["qwerty123"], ["limit=10"]),
    ("amqp://guest:guestpw@rabbit:5672/vhost", ["guestpw"], ["rabbit:5672"]),
    # JSON / YAML / INI
    ('{"password": "jsonpw", "data_root": "/data/docker"}', ["jsonpw"], ["/data/docker"]),
    ('{"auths":{"registry":{"auth":"dXNlcjpwYXNz"}}}', ["dXNlcjpwYXNz"], []),
    ('"Authorization": "Basic dXNlcjpwYXNz"', ["dXNlcjpwYXNz"], []),
    ("  client_secret: yamlsecret", ["yamlsecret"], ["client_secret:"]),
    ("smtp_password = inipw", ["inipw"], []),
    ("PrivateKey = wgPrivKeyAAAA=", ["wgPrivKeyAAAA"], []),
    ("proxy_set_header Authorization \"Bearer nginxtoken\";", ["nginxtoken"], []),
    ("ldapsearch -x -D cn=admin,dc=lan -w ldappw -b dc=lan", ["ldappw"], ["cn=admin,dc=lan"]),
    ("lftp -u backup,lftppw sftp://nas -e 'mirror -R /data/x'", ["lftppw"], ["/data/x"]),
    ('curl --user "admin:two words" https://x/ -o /data/y', ["two words"], ["/data/y"]),
    ("requirepass foobared-redis", ["foobared-redis"], ["requirepass "]),
    ("masterauth replica-pw", ["replica-pw"], []),
    ("machine nas.lan login backup password netrcpw", ["netrcpw"], ["login backup"]),
    ("  - MYSQL_ROOT_PASSWORD=composepw", ["composepw"], []),
    ("    MYSQL_ROOT_PASSWORD: composeyaml", ["composeyaml"], []),
    ('"Env": ["DB_PASS=envjson", "PATH=/usr/bin:/data/bin"]', ["envjson"], ["/data/bin"]),
    ('curl --header "X-API-Key: hdrkey" https://x', ["hdrkey"], []),
    ("rclone sync /data/x s3:b --s3-secret-access-key rclonesk", ["rclonesk"], ["/data/x"]),
    ('"--token=quotedwhole" --out /data/o', ["quotedwhole"], ["/data/o"]),
    # token shapes anywhere
    (f"SLACK={SLACK}", [SLACK], []),
    (f"jwt {JWT}", [JWT], []),
    (f"stripe {STRIPE}", [STRIPE], []),
    (f"echo {PAT} | gh auth login --with-token", [PAT], ["--with-token"]),
    # paths that look like tokens stay
    ("WorkingDirectory=/data/hf_cache/hub", [], ["/data/hf_cache/hub"]),
    ("ExecStart=/data/hf_0123456789abcdefghijklmnopqrstuv/run", [], [
        "/data/hf_0123456789abcdefghijklmnopqrstuv/run"]),
    ("ExecStart=/data/sk-learn-models-abcdefghijklmnopqrstuv/run --tokenizer /data/tok", [],
     ["/data/sk-learn-models-abcdefghijklmnopqrstuv/run", "--tokenizer /data/tok"]),
    ("-v /data/secret:/secret:ro", [], ["/data/secret:/secret:ro"]),
    ("The author wrote about authorization in prose", [], ["authorization in prose"]),
]


def test_the_corpus_is_big_enough():
    assert len(CORPUS) >= 40


@pytest.mark.parametrize(("text", "secrets", "kept"), CORPUS)
def test_secrets_gone_and_the_rest_intact(text, secrets, kept):
    out = redact_text(text)
    for s in secrets:
        assert s not in out, (text, out)
    if secrets:
        assert MASK in out, (text, out)
    for k in kept:
        assert k in out, (text, out)
    assert redact_text(out) == out, "redacting twice changes nothing"


def test_long_text_is_cut_with_the_cut_said():
    line = "ExecStart=/data/bin/x " + "--flag " * 200 + "--password=late"
    out = shown_text(line)
    assert len(out) < 400 and out.endswith("chars]") and "late" not in out


def test_a_secret_across_the_cut_is_masked_and_a_huge_line_is_cheap():
    import time
    secret = "Zq" + "9" * 40
    line = "x" * 280 + f" PASSWORD={secret} " + "--flag " * 300_000        # 2 MB
    start = time.monotonic()
    out = shown_text(line)
    assert time.monotonic() - start < 0.5
    assert "Zq9" not in out and out.endswith("chars]") and len(out) < 340
