"""Secrets never leave the machine: what the redactor masks, and what it must leave alone."""

import pytest

from vacate.observing.parsers.redact import MASK, is_secret_name, redact_text, redact_value

CASES = [
    ("Environment=HF_TOKEN=abc123", "Environment=HF_TOKEN=<redacted>"),
    ('Environment="HF_TOKEN=abc def" X=1', 'Environment="HF_TOKEN=<redacted>" X=1'),
    ('Environment="A=1" "DB_PASSWORD=xx"', 'Environment="A=1" "DB_PASSWORD=<redacted>"'),
    ('Environment=HF_TOKEN="abc def" WORK=/data/x', 'Environment=HF_TOKEN="<redacted>" WORK=/data/x'),
    ("export DB_PASSWORD='my secret'", "export DB_PASSWORD='<redacted>'"),
    ("serve --hf-token xyz --model /data/m", "serve --hf-token <redacted> --model /data/m"),
    ("serve --api-key=xyz --port 1", "serve --api-key=<redacted> --port 1"),
    ("0 3 * * * root PGPASSWORD=s3cr3t pg_dump -f /data/db.sql",
     "0 3 * * * root PGPASSWORD=<redacted> pg_dump -f /data/db.sql"),
    ("s3://AKIAABCDEFGHIJKLMNOP@bucket", "s3://<redacted>@bucket"),
    ("postgres://app:pa55@db/x", "postgres://app:<redacted>@db/x"),
    ('{"api_key": "abc", "path": "/data"}', '{"api_key": "<redacted>", "path": "/data"}'),
    ('{"db_password":"abc","user":"u"}', '{"db_password":"<redacted>","user":"u"}'),
    ("AWS_SECRET_ACCESS_KEY=wJalr OTHER=1", "AWS_SECRET_ACCESS_KEY=<redacted> OTHER=1"),
    ("curl -H x hf_abcdefghijklmnopqrstuvwxyz12", "curl -H x <redacted>"),
]


@pytest.mark.parametrize(("text", "shown"), CASES)
def test_redacts(text, shown):
    assert redact_text(text) == shown


@pytest.mark.parametrize("text", [
    "PWD=/data/x SSL_KEY_FILE=/data/k.pem TOKEN_PATH=/data/tok",
    "ExecStart=/data/bin/serve --model-path /data/models/x --port 8000",
    "The author wrote about auth in prose",
    "",
])
def test_leaves_paths_and_prose_alone(text):
    assert redact_text(text) == text


def test_no_secret_survives_in_any_case():
    secret = "Zq9-very-secret-value"
    lines = [f"Environment=MY_TOKEN={secret}", f'Environment="MY_TOKEN={secret} tail"',
             f"--password {secret}", f"password: {secret}", f'"DB_PASSWORD={secret}"',
             f"x PASSWORD='{secret}' y", f"HF_TOKEN=\"{secret}"]
    for line in lines:
        out = redact_text(line)
        assert secret not in out and MASK in out, line
        assert "tail" not in out


def test_redact_value_by_name():
    assert redact_value("HF_TOKEN", "hf_x") == MASK
    assert redact_value("MODEL_DIR", "/data/m") == "/data/m"
    assert redact_value("URL", "https://u:pw@h/") == "https://u:<redacted>@h/"
    assert is_secret_name("--hf-token") and not is_secret_name("OLDPWD")


def test_a_long_run_before_a_url_still_masks_its_password():
    """A scheme is at most 32 characters here (a run of letters is not followed back to its
    start at every position: the bootstrap's base64 took 0.24 s); the URL's password is
    masked however long the run before it."""
    run = "Zm9vYmFy" * 12000
    assert redact_text(f"x {run}https://svc:urlpw-0007@host/") == \
        f"x {run}https://svc:<redacted>@host/"
    assert redact_text(f"{'a' * 40}://u:pw-0008@h") == f"{'a' * 40}://u:<redacted>@h"
