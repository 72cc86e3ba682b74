"""Compiles tracing's C hook for the Python that runs it, on first use, into a cache folder.

Why at run time: `tracing` runs under whatever Python a job uses (3.10 to 3.13), often straight from a checkout
on PYTHONPATH, where no install step ever ran for that interpreter. The install (setup.py) builds the hook for
the installing Python only; any other interpreter compiles its own here, once, with the machine's C compiler and
its own headers, and finds it again next time:

    $HANGDOCTOR_CACHE_DIR, else $XDG_CACHE_HOME/hangdoctor, else ~/.cache/hangdoctor
        ctrace-<digest of the sources>-<tag of the interpreter>/_ctrace<EXT_SUFFIX>

The interpreter's tag covers its exact version and build: the frame hook reads interpreter structures that may
change between patch releases. The compiler is $CC, else the one Python was built with (sysconfig's CC). Ranks
that start together on a node take a file lock: one compiles, the others wait and load its result. A cache
folder that cannot be written falls back to one under the temporary directory, private to this user.

This file is also read by setup.py (by path, stdlib only) for the digest the install-time build carries.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = "_ctrace"
SOURCES = ("ctrace.h", "codetable.c", "threadstate.c", "writer.c", "writerobject.c", "frames.c", "hookbase.c",
           "evalhook.c", "monitor.c", "module.c")
COMPILE_TIMEOUT_S = 300


class BuildError(Exception):
    """The hook cannot be built here; the message says why, in a few words."""


def source_digest(folder: str = HERE) -> str | None:
    """What a build must carry to be taken for these sources; None when the sources are not there."""
    digest = hashlib.sha256()
    for name in SOURCES:
        try:
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read() + b"\0")
        except OSError:
            return None
    return digest.hexdigest()[:16]


def interpreter_tag() -> str:
    paths = sysconfig.get_paths()
    text = "\0".join((sys.version, str(sys.hexversion), paths["include"], paths.get("platinclude", ""),
                      sysconfig.get_config_var("EXT_SUFFIX") or ""))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_root() -> str:
    explicit = os.environ.get("HANGDOCTOR_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hangdoctor")


def built_path(root: str | None = None) -> str:
    """Where this interpreter's build of these sources lives (or will)."""
    folder = f"ctrace-{source_digest()}-{interpreter_tag()}"
    return os.path.join(root or cache_root(), folder, MODULE + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def ensure_built() -> str:
    """The path of this interpreter's build, compiled now if it is not there yet. Raises BuildError."""
    if source_digest() is None:
        raise BuildError(f"the C sources are not in {HERE}")
    try:
        return _build_in(built_path())
    except OSError as first:
        private = os.path.join(tempfile.gettempdir(), f"hangdoctor-{os.getuid()}")
        try:
            os.makedirs(private, mode=0o700, exist_ok=True)
            st = os.stat(private)
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                raise BuildError(f"cannot write {cache_root()} ({first.strerror}) and {private} is not private")
            return _build_in(built_path(private))
        except OSError as e:
            raise BuildError(f"no writable cache folder ({cache_root()}: {first.strerror}; {private}: "
                             f"{e.strerror})") from e


def _build_in(target: str) -> str:
    if os.path.exists(target):
        return target
    folder = os.path.dirname(target)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    with open(os.path.join(folder, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # ranks starting together: one compiles, the others wait for it
        if not os.path.exists(target):
            partial = f"{target}.{os.getpid()}.tmp"
            try:
                compile_to(partial)
                os.replace(partial, target)  # atomic: nobody loads a half-written file
            finally:
                if os.path.exists(partial):
                    os.unlink(partial)
    return target


def compile_to(output: str, sources: list[str] | None = None, digest: str | None = None) -> None:
    """One compiler run over the hook's sources (or others: bench/bench_tracing_hooks.py) for this interpreter,
    into the extension module `output`. Raises BuildError."""
    paths = sysconfig.get_paths()
    includes = list(dict.fromkeys(p for p in (paths["include"], paths.get("platinclude")) if p))
    if not any(os.path.exists(os.path.join(p, "Python.h")) for p in includes):
        raise BuildError(f"no Python.h for this Python in {includes[0]} (its development headers, e.g. the "
                         "python3-dev package, are not installed)")
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    command = [*compiler, "-shared", "-fPIC", "-O2", *(f"-I{p}" for p in includes),
               f'-DCTRACE_DIGEST="{digest or source_digest()}"',
               *(sources or [os.path.join(HERE, name) for name in SOURCES if name.endswith(".c")]), "-o", output]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError as e:
        raise BuildError(f"no C compiler ({compiler[0]!r} not found)") from e
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"the C compiler ran longer than {COMPILE_TIMEOUT_S} s") from e
    if done.returncode != 0:
        errors = [line for line in (done.stderr or done.stdout).splitlines() if "error" in line.lower()]
        detail = (errors or (done.stderr or done.stdout).splitlines() or ["no output"])[0].strip()
        raise BuildError(f"the C compiler failed ({compiler[0]}: {detail[:200]})")
