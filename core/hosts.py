"""Host names and addresses: which of them reach only this machine."""

from __future__ import annotations

import ipaddress


def loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address literal (no port, no brackets)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
