#!/usr/bin/env python
"""Fetch the Jupyter-stack wheels a lent GPU machine lacks into ``.whl/``, each checked against
the committed lock ``scripts/device_wheels.txt``.

The GPU machine (see CONTRIBUTING.md, "Paper-scale runs") has Python 3.12 with JAX and the
scientific stack but not nbclient, nbformat, ipykernel or myst-nb, and it reaches no package
registry: their wheels travel with the working tree (``run`` with ``carry: [".whl"]``) and
``scripts/paper_run.sh`` installs them into ``/tmp/site``. The lock lists one wheel per package,
``name==version --hash=sha256:...`` (pip's hash format), for CPython 3.12 on manylinux x86_64:
the runtime dependencies of :data:`ROOTS` at the versions of this environment (``pip freeze`` of
the iclgd venv), less the packages the machine already has (the lock's ``# device-has:`` lines;
carrying one of those would shadow the machine's own copy) and less myst-nb's Sphinx side (its
``# not-carried:`` lines: a kernel imports ``myst_nb.glue`` only, which needs IPython, nbformat
and docutils; Sphinx, Babel, SQLAlchemy, ... are imported by a book build alone).

The lock is an artefact of the device run, made from this venv just before it: the default
command first compares the lock with this environment (:func:`drift`) and rewrites it when they
differ (a newer patch release that ``pip install`` took today), then downloads. The test suite
checks only that the committed lock is internally consistent (:func:`problems`), never that it
equals whatever the package index served today.

Usage::

    python scripts/device_wheels.py            # relock if this venv differs, download into .whl/,
                                               # verify every sha256 (before a device run)
    python scripts/device_wheels.py --check    # verify .whl/ only (no download; paper_run.sh)
    python scripts/device_wheels.py --relock   # rewrite the lock from this environment

Each wheel's sha256 is compared with the lock after the download (and pip is given the hashes,
``--require-hashes``); a wheel in ``.whl/`` that the lock does not name is removed, so that two
versions of one package never travel.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "scripts" / "device_wheels.txt"
WHEELS = REPO / ".whl"
ROOTS = ("nbclient", "nbformat", "ipykernel", "myst-nb")
# the machine's interpreter: CPython 3.12 on glibc x86_64 (pip matches manylinux_2_N exactly)
PYTHON = "3.12"
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
MARKER_ENV = {
    "python_version": PYTHON,
    "python_full_version": PYTHON + ".3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
_LINE = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)\s+--hash=sha256:([0-9a-f]{64})\s*$")
MAX_MIB = 40  # the wheels travel with the working tree, 64 MiB a call in all


def canonical(name: str) -> str:
    """PEP 503 name: ``Jinja2`` -> ``jinja2``, ``myst_nb`` -> ``myst-nb``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


class Lock(NamedTuple):
    """A lock file: ``pins`` ``{name: (version, sha256)}`` (the wheels carried),
    ``device_has`` (names the machine has, not carried, their dependencies not followed) and
    ``not_carried`` (dependencies left out: nothing imports them while notebooks execute)."""

    pins: dict[str, tuple[str, str]]
    device_has: set[str]
    not_carried: set[str]


def read_lock(path: Path = LOCK) -> Lock:
    """The :class:`Lock` of a lock file: lines ``name==version --hash=sha256:HEX``, comments,
    and the comment lines ``# device-has: NAME ...`` and ``# not-carried: NAME ...``.

    Raises:
        ValueError: a line that is neither a comment nor ``name==version --hash=sha256:HEX``,
            or a package named twice.
    """
    pins: dict[str, tuple[str, str]] = {}
    lists: dict[str, set[str]] = {"# device-has:": set(), "# not-carried:": set()}
    for n, raw in enumerate(Path(path).read_text(encoding="utf8").splitlines(), start=1):
        line = raw.strip()
        head = next((h for h in lists if line.startswith(h)), None)
        if head:
            lists[head] |= {canonical(x) for x in line.removeprefix(head).split()}
            continue
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"{path}:{n}: not 'name==version --hash=sha256:HEX': {line!r}")
        name = canonical(m[1])
        if name in pins:
            raise ValueError(f"{path}:{n}: {name} is pinned twice")
        pins[name] = (m[2], m[3])
    return Lock(pins, lists["# device-has:"], lists["# not-carried:"])


def wheel_name(filename: str) -> tuple[str, str]:
    """``(canonical name, version)`` of a wheel file name (PEP 427)."""
    if not filename.endswith(".whl") or filename.count("-") < 4:
        raise ValueError(f"not a wheel file name: {filename!r}")
    dist, version = filename.split("-")[:2]
    return canonical(dist), version


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(folder: Path = WHEELS, lock: Path = LOCK) -> list[str]:
    """Problems of ``folder`` against ``lock`` (empty: one wheel per pin, each hash equal)."""
    pins = read_lock(lock).pins
    problems, found = [], {}
    for path in sorted(Path(folder).glob("*.whl")):
        name, version = wheel_name(path.name)
        if name not in pins:
            problems.append(f"{path.name}: not in the lock")
            continue
        if name in found:
            problems.append(f"{path.name}: a second wheel of {name}")
            continue
        found[name] = path
        want_version, want_hash = pins[name]
        if version != want_version:
            problems.append(f"{path.name}: version {version}, the lock pins {want_version}")
        elif sha256(path) != want_hash:
            problems.append(f"{path.name}: sha256 differs from the lock's")
    problems += [f"{name}=={pins[name][0]}: missing" for name in sorted(set(pins) - set(found))]
    return problems


def _download(requirements: list[str], dest: Path, require_hashes: bool) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(requirements) + "\n")
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    cmd += ["--only-binary=:all:", "--python-version", PYTHON, "--implementation", "cp"]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    cmd += ["--require-hashes"] if require_hashes else []
    subprocess.run(cmd + ["-d", str(dest), "-r", f.name], check=True)
    Path(f.name).unlink()


def fetch(folder: Path = WHEELS, lock: Path = LOCK) -> list[Path]:
    """Download the lock's wheels into ``folder`` (those already there with the right hash are
    kept, any other wheel removed) and verify them; return the wheels.

    Raises:
        RuntimeError: a wheel whose sha256 differs from the lock's (it is deleted).
    """
    pins = read_lock(lock).pins
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for path in folder.glob("*.whl"):
        name, version = wheel_name(path.name)
        if pins.get(name, ("", ""))[0] != version or sha256(path) != pins[name][1]:
            path.unlink()  # stale, foreign or corrupt: a second version would break the install
    have = {wheel_name(p.name)[0] for p in folder.glob("*.whl")}
    todo = [f"{n}=={v} --hash=sha256:{h}" for n, (v, h) in sorted(pins.items()) if n not in have]
    if todo:
        _download(todo, folder, require_hashes=True)
    problems = verify(folder, lock)
    if problems:
        for path in folder.glob("*.whl"):
            if any(p.startswith(path.name + ":") for p in problems):
                path.unlink()
        raise RuntimeError("wheels do not match the lock:\n  " + "\n  ".join(problems))
    return sorted(folder.glob("*.whl"))


def closure(roots: tuple[str, ...] = ROOTS, exclude: set[str] | frozenset = frozenset()):
    """``{name: version}``: ``roots`` and their runtime dependencies (no extras; markers for
    CPython 3.12 on Linux x86_64), as installed in this environment, less ``exclude``.

    Raises:
        ValueError: a needed package that this environment lacks.
    """
    import importlib.metadata as md

    from packaging.requirements import Requirement

    out: dict[str, str] = {}
    stack = [canonical(r) for r in roots]
    while stack:
        name = stack.pop()
        if name in out or name in exclude:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError as e:
            raise ValueError(f"{name} is needed but not installed here: pip install it") from e
        out[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(MARKER_ENV):
                stack.append(canonical(req.name))
    return dict(sorted(out.items()))


def problems(lock: Lock) -> list[str]:
    """What makes ``lock`` inconsistent in itself (empty: consistent): a root of :data:`ROOTS`
    not pinned, a pin that is also on the device-has or not-carried list, a device-has list
    without the machine's scientific stack (``jax``, ``numpy``, ``matplotlib``: a wheel of one
    would shadow the machine's copy), ``docutils`` not pinned (``myst_nb.glue`` imports it), or
    a version that is not a PEP 440 version. Nothing here depends on the package index."""
    from packaging.version import InvalidVersion, Version

    out = [f"{r}: a root, not pinned" for r in ROOTS if canonical(r) not in lock.pins]
    out += [
        f"{n}: pinned and also listed as device-has"
        for n in sorted(set(lock.pins) & lock.device_has)
    ]
    out += [
        f"{n}: pinned and also listed as not-carried"
        for n in sorted(set(lock.pins) & lock.not_carried)
    ]
    out += [
        f"{n}: not on the device-has list"
        for n in ("jax", "numpy", "matplotlib")
        if n not in lock.device_has
    ]
    out += [] if "docutils" in lock.pins else ["docutils: not pinned (myst_nb.glue imports it)"]
    for name, (version, _) in sorted(lock.pins.items()):
        try:
            Version(version)
        except InvalidVersion:
            out.append(f"{name}=={version}: not a PEP 440 version")
    return out


def drift(lock: Path = LOCK, env: dict[str, str] | None = None) -> dict[str, tuple]:
    """``{name: (locked version, this environment's version)}`` for every package whose version
    differs between the lock and ``env`` (default: :func:`closure` of this environment less the
    lock's device-has and not-carried lists); ``None`` for a package on one side only."""
    old = read_lock(lock)
    if env is None:
        env = {n: v for n, v in closure(ROOTS, old.device_has).items() if n not in old.not_carried}
    locked = {n: v for n, (v, _) in old.pins.items()}
    names = sorted(set(locked) | set(env))
    return {n: (locked.get(n), env.get(n)) for n in names if locked.get(n) != env.get(n)}


def relock(lock: Path = LOCK) -> Path:
    """Rewrite ``lock`` from this environment: :func:`closure` less the lock's device-has list
    (not followed) and its not-carried list (left out after the closure, so that what they share
    with carried packages stays), each wheel downloaded once to read its sha256. The lock's
    comment lines are kept."""
    old = read_lock(lock)
    pins = {n: v for n, v in closure(ROOTS, old.device_has).items() if n not in old.not_carried}
    with tempfile.TemporaryDirectory() as tmp:
        _download([f"{n}=={v}" for n, v in pins.items()], Path(tmp), require_hashes=False)
        hashes = {wheel_name(p.name)[0]: sha256(p) for p in Path(tmp).glob("*.whl")}
    missing = sorted(set(pins) - set(hashes))
    if missing:
        raise RuntimeError(f"no wheel downloaded for {missing}")
    head = [x for x in Path(lock).read_text(encoding="utf8").splitlines() if x.startswith("#")]
    body = [f"{n}=={v} --hash=sha256:{hashes[n]}" for n, v in pins.items()]
    Path(lock).write_text("\n".join(head + body) + "\n", encoding="utf8")
    return Path(lock)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="verify .whl/ against the lock only")
    ap.add_argument("--relock", action="store_true", help="rewrite the lock from this venv")
    ap.add_argument("--dest", type=Path, default=WHEELS, help="folder of the wheels (.whl/)")
    a = ap.parse_args(argv)
    if a.relock:
        print(f"wrote {relock()}")
    if a.check:
        problems = verify(a.dest)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    if not a.relock:
        changed = drift()
        if changed:
            for name, (locked, here) in changed.items():
                print(f"{name}: the lock has {locked}, this venv {here}")
            print(f"relocked {relock()}: commit it with the run")
    try:
        wheels = fetch(a.dest)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    mib = sum(p.stat().st_size for p in wheels) / 2**20
    print(f"{len(wheels)} wheels in {a.dest}, {mib:.1f} MiB, every sha256 as locked")
    if mib > MAX_MIB:
        print(f"error: over {MAX_MIB} MiB: the working tree travels 64 MiB a call", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
