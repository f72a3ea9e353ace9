"""``egress_allow`` entries: parsed with errors naming the entry; host names only ever allow
public addresses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mol.hcp.egress import parse_destination
from mol.hcp.schema import SandboxConfig


@pytest.mark.parametrize("entry,host,address,port,allowed", [
    ("pypi.org", "pypi.org", "151.101.0.223", 443, True),
    ("pypi.org", "PyPI.org.", "151.101.0.223", 80, True),
    ("pypi.org:443", "pypi.org", "151.101.0.223", 80, False),
    ("pypi.org", "evil-pypi.org", "151.101.0.223", 443, False),
    ("*.pythonhosted.org", "files.pythonhosted.org", "151.101.0.223", 443, True),
    ("*.pythonhosted.org", "pythonhosted.org", "151.101.0.223", 443, False),
    # A name that resolves to the Docker host, a private range or a metadata endpoint:
    ("pypi.org", "pypi.org", "172.17.0.1", 443, False),
    ("pypi.org", "pypi.org", "10.0.0.5", 443, False),
    ("pypi.org", "pypi.org", "169.254.169.254", 80, False),
    ("pypi.org", "pypi.org", "127.0.0.1", 443, False),
    ("10.1.0.0/16", "db.internal", "10.1.2.3", 5432, True),
    ("10.1.0.0/16:5432", "10.1.2.3", "10.1.2.3", 22, False),
    ("192.0.2.7", "192.0.2.7", "192.0.2.8", 80, False),
    ("[2001:db8::1]:443", "2001:db8::1", "2001:db8::1", 443, True),
])
def test_destinations(entry, host, address, port, allowed):
    assert parse_destination(entry).allows(host, address, port) is allowed


@pytest.mark.parametrize("entry", ["localhost", "https://pypi.org", "pypi.org/simple",
                                   "pypi.org:0", "pypi.org:99999", "10.0.0.0/33", "a b.org",
                                   "*.", "*"])
def test_malformed_entries_are_named(entry):
    with pytest.raises(ValueError, match="egress_allow entry"):
        parse_destination(entry)


def test_the_policy_is_checked_as_a_whole():
    assert SandboxConfig(network="bridge", egress="allowlist", egress_allow=["pypi.org"])
    for bad, message in [
        ({"egress": "allowlist"}, "needs egress_allow entries"),
        ({"egress_allow": ["pypi.org"]}, "only with egress = 'allowlist'"),
        ({"egress": "allowlist", "egress_allow": ["pypi.org"]}, "needs a network"),
        ({"network": "bridge", "egress": "allowlist", "egress_allow": ["nope"]}, "'nope'"),
    ]:
        with pytest.raises(ValidationError, match=message):
            SandboxConfig(**bad)
