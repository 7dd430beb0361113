#!/usr/bin/env python3
"""The clients' versions follow the server's: the workspace version in Cargo.toml.

    versions.py --server        print the server's version
    versions.py --check         exit 1, listing each file that differs, unless every client
                                version (and the committed openapi.json) is the server's
    versions.py --set VERSION   write VERSION into the Python package's files and
                                src/version.ts (package.json is set by `npm version`)
"""

import json
import re
import sys
import tomllib
from pathlib import Path

CLIENTS = Path(__file__).resolve().parent
ROOT = CLIENTS.parent

PYPROJECT = CLIENTS / "python" / "pyproject.toml"
PY_VERSION = CLIENTS / "python" / "src" / "keyfire_client" / "_version.py"
TS_VERSION = CLIENTS / "typescript" / "src" / "version.ts"
PACKAGE_JSON = CLIENTS / "typescript" / "package.json"
PACKAGE_LOCK = CLIENTS / "typescript" / "package-lock.json"
OPENAPI = CLIENTS / "openapi.json"

# Each text file's version, as one regex group; --set rewrites that group.
TEXT = {
    PYPROJECT: r'(?m)^version = "([^"]+)"$',
    PY_VERSION: r'(?m)^__version__ = "([^"]+)"$',
    TS_VERSION: r'(?m)^export const VERSION = "([^"]+)";$',
}


def server_version() -> str:
    with open(ROOT / "Cargo.toml", "rb") as f:
        return tomllib.load(f)["workspace"]["package"]["version"]


def found() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for path, pattern in TEXT.items():
        m = re.search(pattern, path.read_text(encoding="utf-8"))
        out[str(path.relative_to(ROOT))] = m.group(1) if m else None
    out[str(PACKAGE_JSON.relative_to(ROOT))] = json.loads(PACKAGE_JSON.read_text())["version"]
    lock = json.loads(PACKAGE_LOCK.read_text())
    out[str(PACKAGE_LOCK.relative_to(ROOT))] = lock["version"]
    out[f"{PACKAGE_LOCK.relative_to(ROOT)} (packages[''])"] = lock["packages"][""]["version"]
    out[f"{OPENAPI.relative_to(ROOT)} (info.version)"] = json.loads(OPENAPI.read_text())["info"][
        "version"
    ]
    return out


def main(argv: list[str]) -> int:
    if argv == ["--server"]:
        print(server_version())
        return 0
    if argv == ["--check"]:
        want = server_version()
        wrong = {k: v for k, v in found().items() if v != want}
        for name, got in wrong.items():
            print(f"version mismatch: {name} has {got!r}, Cargo.toml's workspace has {want!r}")
        if wrong:
            print("fix: clients/generate.sh (it sets every client version from Cargo.toml)")
            return 1
        print(f"versions: all {want}")
        return 0
    if len(argv) == 2 and argv[0] == "--set":
        version = argv[1]
        for path, pattern in TEXT.items():
            text = path.read_text(encoding="utf-8")
            m = re.search(pattern, text)
            if not m:
                print(f"error: no version line in {path}", file=sys.stderr)
                return 1
            path.write_text(text[: m.start(1)] + version + text[m.end(1) :], encoding="utf-8")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
