"""In-tree PEP 517 build backend for safeweights.

It runs the project's CMake build for the `safeweights_python` target (library + extension, no tests
or benchmarks) and packs the assembled package folder into a wheel. It imports nothing outside the
standard library, so pip needs no package index to build: `pip install .` works offline when the
C++ build dependencies are installed (scripts/install-deps.sh).

Environment: SAFEWEIGHTS_BUILD_DIR overrides the build folder (default build-pip/ in the source
tree, kept between builds so that reinstalling is incremental); CMAKE_GENERATOR as for cmake.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _version() -> str:
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*safeweights\s+VERSION\s+([0-9][0-9.]*)", text)
    if not m:
        raise RuntimeError("cannot find project(safeweights VERSION x.y.z) in CMakeLists.txt")
    return m.group(1)


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _metadata() -> str:
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {_version()}",
        f"Summary: {p['description']}",
        f"Requires-Python: {p['requires-python']}",
        f"License: {p['license']['text']}",
    ]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {d}; extra == '{extra}'" for d in deps]
    readme = ROOT / p.get("readme", "README.md")
    body = readme.read_text() if readme.exists() else ""
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + body


def _tag() -> str:
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{platform}"


def _build_package() -> Path:
    build = Path(os.environ.get("SAFEWEIGHTS_BUILD_DIR", ROOT / "build-pip"))
    generator = ["-G", "Ninja"] if shutil.which("ninja") and not os.environ.get("CMAKE_GENERATOR") else []
    subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
         "-DSAFEWEIGHTS_BUILD_TESTS=OFF", "-DSAFEWEIGHTS_BUILD_BENCH=OFF", "-DSAFEWEIGHTS_BUILD_PYTHON=ON",
         f"-DSAFEWEIGHTS_PYTHON={sys.executable}"],
        check=True, stdout=sys.stderr,
    )
    subprocess.run(
        ["cmake", "--build", str(build), "--target", "safeweights_python", "-j", str(os.cpu_count() or 1)],
        check=True, stdout=sys.stderr,
    )
    return build / "python" / "safeweights"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _dist_info_name() -> str:
    return f"safeweights-{_version()}.dist-info"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = Path(metadata_directory) / _dist_info_name()
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(_metadata())
    return dist_info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _build_package()
    tag = _tag()
    wheel_name = f"safeweights-{_version()}-{tag}.whl"
    dist_info = _dist_info_name()
    files = []
    for path in sorted(package.iterdir()):
        if path.is_file() and (path.suffix in (".py", ".pyi", ".so") or path.name == "py.typed"):
            files.append((f"safeweights/{path.name}", path.read_bytes()))
    files.append((f"{dist_info}/METADATA", _metadata().encode()))
    files.append((f"{dist_info}/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: safeweights_build\nRoot-Is-Purelib: false\n" f"Tag: {tag}\n").encode()))
    record = "\n".join(_record_line(n, d) for n, d in files) + f"\n{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode()))
    out = Path(wheel_directory) / wheel_name
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    os.replace(tmp, out)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    """The tracked source files (git ls-files), as safeweights-<version>.tar.gz."""
    base = f"safeweights-{_version()}"
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True).stdout
    out = Path(sdist_directory) / f"{base}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for rel in filter(None, listed.decode().split("\0")):
            tar.add(ROOT / rel, arcname=f"{base}/{rel}", recursive=False)
    return out.name
