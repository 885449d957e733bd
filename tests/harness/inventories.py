"""Ansible inventories of the test sshd for the fleet tests (``check --inventory`` and the
``vacate.volume`` collection alike)."""

from __future__ import annotations

import os
import sys

from harness.paths import HARNESS

PROXY = os.path.join(HARNESS, "slow_proxy.py")


def delayed_inventory(path, server, names, delay: float,
                      python: str = "/usr/bin/python3", log: str | None = None) -> str:
    """Hosts that are ``delay`` seconds away (a ProxyCommand that sleeps, then relays);
    ``log``: the file where each connection's interval is appended (see slow_proxy)."""
    proxy = f"{sys.executable} {os.path.abspath(PROXY)} {delay} 127.0.0.1 {server.port}"
    if log is not None:
        proxy += f" {log}"
    lines = ["[slow]"] + [f"{n} ansible_host=127.0.0.1 ansible_port={server.port}"
                          for n in names]
    lines += ["[slow:vars]", f"ansible_python_interpreter={python}",
              f"ansible_ssh_common_args='-F {server.config} -o \"ProxyCommand={proxy}\"'"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def one_host(path, server, python: str, name: str = "web1") -> str:
    """An inventory of one host, ``name`` (group ``fleet``): ``server`` (a test sshd), with
    ``python`` its interpreter."""
    path.write_text("[fleet]\n"
                    f"{name} ansible_host=127.0.0.1 ansible_port={server.port} "
                    f"ansible_python_interpreter={python}\n"
                    f"[fleet:vars]\nansible_ssh_common_args='-F {server.config}'\n")
    return str(path)
