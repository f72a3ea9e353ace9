"""``[sandbox] egress_allow`` entries: where an ``allowlist`` sandbox may connect.

An entry is a host name (``pypi.org``; ``*.pythonhosted.org`` for any subdomain) or an
address or range (``192.0.2.7``, ``10.1.0.0/16``, ``[2001:db8::1]``), each with an optional
``:port``. A host name only ever allows public addresses: whatever it resolves to, it
cannot lead a sandbox to the Docker host, a private range or a metadata endpoint
(``169.254.169.254``); those need an explicit range. The sandbox's gateway
(``mol.sandboxes.gateway``) applies the rules to every connection it is asked to make.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Destination:
    """One ``egress_allow`` entry: a host name pattern or an address range, and a port."""

    host: str | None = None
    """``example.org`` or ``*.example.org`` (any subdomain), lower case."""
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None
    """Only this port; ``None``: any."""

    def allows(self, host: str, address: str, port: int) -> bool:
        """Whether a connection to ``address`` (``host`` resolved to it) on ``port`` is
        allowed: a host rule needs a public address (no name may lead to the Docker host or
        a private range), an address range allows its addresses."""
        if self.port is not None and port != self.port:
            return False
        ip = ipaddress.ip_address(address)
        if self.network is not None:
            return ip in self.network
        name = host.lower().rstrip(".")
        assert self.host is not None
        matched = (name.endswith(self.host[1:]) and name != self.host[2:]
                   if self.host.startswith("*.") else name == self.host)
        return matched and ip.is_global


_HOST = re.compile(r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*"
                   r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def parse_destination(entry: str) -> Destination:
    """An ``egress_allow`` entry; ``ValueError`` naming it when malformed."""
    text, port = entry.strip().lower(), None
    if "://" in text or ("/" in text.split(":")[0] and not text[:1].isdigit()):
        raise ValueError(f"egress_allow entry {entry!r}: give a host name or an address, "
                         "not a URL (pypi.org, pypi.org:443)")
    if text.startswith("["):  # [2001:db8::1]:443 or [2001:db8::/32]
        inner, _, rest = text[1:].partition("]")
        text, port = inner, rest.removeprefix(":") or None
    elif text.count(":") == 1:
        text, port = text.split(":")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"egress_allow entry {entry!r}: the port must be 1-65535")
    number = int(port) if port is not None else None
    try:
        return Destination(network=ipaddress.ip_network(text, strict=False), port=number)
    except ValueError:
        pass
    if not _HOST.match(text) or "." not in text:
        raise ValueError(f"egress_allow entry {entry!r} is neither a host name "
                         "(example.org, *.example.org) nor an address or range "
                         "(192.0.2.7, 10.0.0.0/8, [2001:db8::1]), with an optional :port")
    return Destination(host=text, port=number)


def check_policy(egress: str, allow: list[str], network: str) -> None:
    """``[sandbox]``'s egress settings as a whole; ``ValueError`` saying what is wrong."""
    for entry in allow:
        parse_destination(entry)
    if egress != "allowlist" and allow:
        raise ValueError("egress_allow is used only with egress = 'allowlist'")
    if egress == "allowlist":
        if not allow:
            raise ValueError("egress = 'allowlist' needs egress_allow entries "
                             "(with none, use egress = 'none')")
        if network in ("none", "host"):
            raise ValueError(f"egress = 'allowlist' needs a network for its gateway; "
                             f"network = {network!r} has none it can share")
