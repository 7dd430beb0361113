"""The package's version follows the server's (the workspace version in Cargo.toml)."""

import tomllib

from conftest import ROOT

import keyfire_client


def test_version_follows_the_server():
    with open(ROOT / "Cargo.toml", "rb") as f:
        server = tomllib.load(f)["workspace"]["package"]["version"]
    with open(ROOT / "clients" / "python" / "pyproject.toml", "rb") as f:
        package = tomllib.load(f)["project"]["version"]
    assert keyfire_client.__version__ == package == server
