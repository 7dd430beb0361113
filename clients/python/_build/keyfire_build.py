"""A PEP 517 build backend for keyfire-client with no build dependencies.

pip builds a project in an isolated environment and downloads its build backend into it, so
`pip install ./clients/python` would need the network for setuptools or hatchling even when
every runtime dependency is installed. This backend is in the tree (`backend-path`) and uses
only the standard library, so the install works offline.

It builds a pure-Python wheel of `src/keyfire_client`, an sdist, and an editable wheel (a
`.pth` file naming `src`), from the `[project]` table of pyproject.toml.
"""

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "keyfire_client"
# A fixed timestamp makes the archives reproducible (1980-01-01 is the earliest zip allows).
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def _project():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(project):
    return project["name"].replace("-", "_")


def _metadata(project):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
        f"Requires-Python: {project['requires-python']}",
    ]
    if "license" in project:
        lines.append(f"License: {project['license']}")
    for url_name, url in project.get("urls", {}).items():
        lines.append(f"Project-URL: {url_name}, {url}")
    lines += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    readme = ROOT / project.get("readme", "README.md")
    body = ""
    if readme.is_file():
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + readme.read_text(encoding="utf-8")
    return "\n".join(lines) + "\n" + body


def _package_files():
    src = ROOT / "src"
    for path in sorted((src / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path.relative_to(src).as_posix(), path.read_bytes()


def _write_wheel(wheel_directory, files):
    project = _project()
    name, version = _dist_name(project), project["version"]
    dist_info = f"{name}-{version}.dist-info"
    files = list(files) + [
        (f"{dist_info}/METADATA", _metadata(project).encode()),
        (
            f"{dist_info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: keyfire_build\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n",
        ),
    ]
    record = []
    for arcname, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append(f"{arcname},sha256={digest.decode()},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))

    filename = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / filename, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file puts src/ on sys.path: edits to the sources apply without reinstalling.
    pth = (str(ROOT / "src") + "\n").encode()
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", pth)])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    filename = f"{base}.tar.gz"
    keep = ["pyproject.toml", "README.md", "_build", "src"]
    with tarfile.open(Path(sdist_directory) / filename, "w:gz") as tar:
        for top in keep:
            path = ROOT / top
            if not path.exists():
                continue
            paths = [path] if path.is_file() else sorted(path.rglob("*"))
            for p in paths:
                if p.is_file() and "__pycache__" not in p.parts:
                    rel = p.relative_to(ROOT).as_posix()
                    info = tar.gettarinfo(str(p), f"{base}/{rel}")
                    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                    with open(p, "rb") as f:
                        tar.addfile(info, f)
        pkg_info = _metadata(project).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return filename


__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
]

if __name__ == "__main__":  # pragma: no cover - a manual check: python _build/keyfire_build.py
    print(build_wheel(os.getcwd()))
