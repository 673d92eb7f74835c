"""PEP 517 build backend of the `strata` Python package: drives CMake, then zips a wheel.

It builds the whole SDK with -DSTRATA_BUILD_PYTHON=ON (only the strata_python target and what it
links), for the interpreter running pip, from the repository that holds this directory. Nothing is
downloaded: the build needs the Debian packages scripts/setup installs.

Settings (environment variables, or pip's --config-settings KEY=VALUE):
  build-dir / STRATA_PY_BUILD_DIR   CMake build directory to use and keep (default: a temporary
                                    one). An existing strata build directory is reused, so its
                                    objects are not compiled again.
  build-type / STRATA_PY_BUILD_TYPE CMAKE_BUILD_TYPE (default Release).
  jobs / STRATA_PY_JOBS             parallel build jobs (default 2).
  programs / STRATA_PY_PROGRAMS     "1" (default): also build the programs strata, strata-sim and
                                    strata-sidecar and put them in the wheel (strata/_bin/,
                                    debug info stripped), installed as console scripts of the
                                    same names; "0": the extension only (a faster build).
"""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from typing import Any, Dict, List, Optional

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent                 # bindings/python
REPO = PACKAGE_ROOT.parent.parent          # the strata checkout
NAME = "strata"
# The programs the wheel carries: console script name -> CMake target and its path in the build.
PROGRAMS = {
    "strata": "sdk/apps/strata/strata",
    "strata-sim": "sdk/apps/strata-sim/strata-sim",
    "strata-sidecar": "sdk/apps/strata-sidecar/strata-sidecar",
}


def _version() -> str:
    text = (PACKAGE_ROOT / "pyproject.toml").read_text()
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if not match:
        raise RuntimeError("bindings/python/pyproject.toml has no version")
    return match.group(1)


def _setting(config_settings: Optional[Dict[str, Any]], key: str, env: str,
             default: Optional[str]) -> Optional[str]:
    if config_settings and config_settings.get(key):
        return str(config_settings[key])
    return os.environ.get(env) or default


def _tag() -> str:
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = impl + (getattr(sys, "abiflags", "") or "")
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{impl}-{abi}-{platform}"


def _programs_wanted(config_settings: Optional[Dict[str, Any]]) -> bool:
    return _setting(config_settings, "programs", "STRATA_PY_PROGRAMS", "1") not in ("0", "no",
                                                                                   "false")


def _program_targets(cmake: str, build_dir: pathlib.Path) -> List[str]:
    """The programs this build directory defines targets for (strata-sidecar needs gRPC++; a
    directory configured with STRATA_BUILD_APPS=OFF has none)."""
    out = subprocess.run([cmake, "--build", str(build_dir), "--target", "help"],
                         capture_output=True, text=True)
    listed = set(re.findall(r"^(?:\.\.\. )?([\w.-]+)(?::|$)", out.stdout, re.M))
    return [name for name in PROGRAMS if name in listed]


def _cmake_build(config_settings: Optional[Dict[str, Any]]) -> pathlib.Path:
    """Configures and builds strata_python (and the programs); returns the assembled package
    directory."""
    if not (REPO / "sdk" / "include" / "strata").is_dir():
        raise RuntimeError(
            f"{REPO} is not a strata checkout: install with `pip install ./bindings/python` from "
            "the repository (the extension is built from the SDK sources next to it)")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("cmake not found: run scripts/setup (Debian package cmake)")
    build_dir_setting = _setting(config_settings, "build-dir", "STRATA_PY_BUILD_DIR", None)
    build_dir = pathlib.Path(build_dir_setting or tempfile.mkdtemp(prefix="strata-py-build-"))
    build_type = _setting(config_settings, "build-type", "STRATA_PY_BUILD_TYPE", "Release")
    jobs = _setting(config_settings, "jobs", "STRATA_PY_JOBS", "2")
    python = os.path.realpath(sys.executable)

    args = [cmake, "-S", str(REPO), "-B", str(build_dir), "-DSTRATA_BUILD_PYTHON=ON"]
    cache = build_dir / "CMakeCache.txt"
    if cache.exists():
        # Reuse the directory as it is configured; it must be for this interpreter.
        match = re.search(r"^Python_EXECUTABLE:[A-Z]+=(.*)$", cache.read_text(), re.M)
        if match and os.path.realpath(match.group(1)) != python:
            raise RuntimeError(f"build directory {build_dir} is configured for "
                               f"{match.group(1)}, not {python}: use another build-dir")
    else:
        apps = "ON" if _programs_wanted(config_settings) else "OFF"
        args += [f"-DPython_EXECUTABLE={python}", f"-DCMAKE_BUILD_TYPE={build_type}",
                 "-DSTRATA_BUILD_TESTS=OFF", f"-DSTRATA_BUILD_APPS={apps}",
                 "-DSTRATA_BUILD_EXAMPLES=OFF", "-DSTRATA_BUILD_BENCH=OFF"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    subprocess.run(args, check=True, stdout=sys.stderr)
    targets = ["strata_python"]
    if _programs_wanted(config_settings):
        programs = _program_targets(cmake, build_dir)
        missing = sorted(set(PROGRAMS) - set(programs))
        if missing:
            print(f"strata_build: the wheel will not carry {', '.join(missing)} (not targets of "
                  f"{build_dir}: configured with STRATA_BUILD_APPS=OFF, or without gRPC++ for "
                  "strata-sidecar)", file=sys.stderr)
        targets += programs
    subprocess.run([cmake, "--build", str(build_dir), "-j", str(jobs), "--target", *targets],
                   check=True, stdout=sys.stderr)
    package = build_dir / "python" / NAME
    if not list(package.glob("_strata*.so")):
        raise RuntimeError(f"the build produced no extension in {package}")
    return package


def _program_files(build_dir: pathlib.Path, config_settings: Optional[Dict[str, Any]]
                   ) -> Dict[str, bytes]:
    """The programs built in `build_dir`, debug info stripped when `strip` is there."""
    if not _programs_wanted(config_settings):
        return {}
    out: Dict[str, bytes] = {}
    strip = shutil.which("strip")
    for name, relative in PROGRAMS.items():
        path = build_dir / relative
        if not path.is_file():
            continue
        if strip:
            with tempfile.TemporaryDirectory() as tmp:
                stripped = pathlib.Path(tmp) / name
                subprocess.run([strip, "--strip-debug", "-o", str(stripped), str(path)],
                               check=True)
                out[name] = stripped.read_bytes()
        else:
            out[name] = path.read_bytes()
    return out


def _entry_points(programs: Dict[str, bytes]) -> str:
    lines = ["[console_scripts]"]
    for name in programs:
        lines.append(f"{name} = strata._programs:{name.replace('-', '_')}_main")
    return "\n".join(lines) + "\n"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _metadata() -> str:
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: Context management for LLM agents: byte-stable prefixes, compaction, "
            "exact token counts\nRequires-Python: >=3.8\n")


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, Any]] = None) -> str:
    dist_info = pathlib.Path(metadata_directory) / f"{NAME}-{_version()}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(_metadata())
    return dist_info.name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    package = _cmake_build(config_settings)
    programs = _program_files(package.parent.parent, config_settings)
    version = _version()
    wheel_name = f"{NAME}-{version}-{_tag()}.whl"
    dist_info = f"{NAME}-{version}.dist-info"
    files = sorted(p for p in package.iterdir()
                   if p.is_file() and (p.suffix in (".py", ".pyi", ".so") or p.name == "py.typed"))
    records = []
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / wheel_name, "w",
                         zipfile.ZIP_DEFLATED) as wheel:
        def add(arcname: str, data: bytes, executable: bool = False) -> None:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            wheel.writestr(info, data)
            records.append(_record_line(arcname, data))

        for path in files:
            add(f"{NAME}/{path.name}", path.read_bytes())
        for name, data in programs.items():
            add(f"{NAME}/_bin/{name}", data, executable=True)
        if programs:
            add(f"{dist_info}/entry_points.txt", _entry_points(programs).encode())
        add(f"{dist_info}/METADATA", _metadata().encode())
        add(f"{dist_info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: strata_build\n"
                                   f"Root-Is-Purelib: false\nTag: {_tag()}\n").encode())
        records.append(f"{dist_info}/RECORD,,")
        wheel.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return wheel_name
