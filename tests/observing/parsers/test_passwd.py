"""``/etc/passwd``: the one parser the systemd, symlink, docker and process readers share."""

from vacate.observing.parsers import passwd

TEXT = """\
root:x:0:0:root:/root:/bin/bash
# a comment
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
ml:x:1000:1000:ML user,,,:/home/ml:/bin/bash
+nisuser::::::
short:x:1001
toor:x:0:0::/root2:/bin/sh

bad:x:notanumber:0::/x:/bin/sh
"""


def test_accounts_in_file_order_with_their_lines():
    users = passwd.parse(TEXT)
    assert [(u.name, u.uid, u.home, u.line) for u in users] == [
        ("root", 0, "/root", 1), ("daemon", 1, "/usr/sbin", 3),
        ("nobody", 65534, "/nonexistent", 4), ("ml", 1000, "/home/ml", 5),
        ("short", 1001, "", 7), ("toor", 0, "/root2", 8)]
    assert users[3].gid == 1000 and users[3].shell == "/bin/bash" and users[4].gid is None


def test_names_by_uid_first_entry_wins():
    assert passwd.names(passwd.parse(TEXT))[0] == "root"
    assert passwd.names(passwd.parse(TEXT))[1000] == "ml"
    assert passwd.parse("") == []
