"""tracing's C hook: the tracer's per-call work done in C, on every Python from 3.10 on (docs/tracing.md).

The pure-Python backends cost what CPython's hooks cost them: before 3.12 every unselected Python call passes
through sys.settrace (about 10x on pure-Python library code), and every selected event is a Python callback, a
clock read and a pack_into (about 1.3 us). The C hook (backend "c") replaces both:
- Python 3.10/3.11: a frame-evaluation function (PEP 523, evalhook.c): one pointer lookup per frame start for
  unselected code, and the interpreter stays on its fast path;
- Python 3.12+: sys.monitoring callbacks written in C (monitor.c), unselected code DISABLEd as before;
- everywhere: the selection cache is a pointer table (codetable.c) filled by the tracer's own Python classify,
  once per code object, and records go straight into the memory-mapped ring (writer.c), in the same format.

Where a build comes from, in this order:
1. `tracing.native._ctrace` next to this file: setup.py builds it at install for the installing Python (an
   editable install puts it in the source tree). Taken when it was built from these very sources for this very
   interpreter (its DIGEST and PY_VERSION_HEX);
2. the cache folder, compiled there on first use with the machine's compiler (build.py), for any interpreter.
When neither works (no compiler, no Python headers, no writable folder), load() returns None, reason() says why,
and the tracer uses the Python backends after one `Warning:` line (backends/__init__.py).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

from tracing.native import build

NAME = "tracing.native._ctrace"
_loaded: dict = {}  # "module" or "reason", once tried
_warned: list[bool] = []


def load():
    """The C hook's module for this interpreter, or None (see reason()). Tried once per process."""
    if not _loaded:
        try:
            _loaded["module"] = _load()
        except build.BuildError as e:
            _loaded["reason"] = str(e)
        except (ImportError, OSError) as e:
            _loaded["reason"] = f"the build does not load: {e}"
    return _loaded.get("module")


def reason() -> str | None:
    """Why load() returned None."""
    load()
    return _loaded.get("reason")


def warn_fallback(fallback: str) -> None:
    """One Warning line per process: the tracer runs, with a slower backend."""
    if not _warned:
        _warned.append(True)
        print(f"Warning: hangdoctor tracing has no C hook for this Python ({reason()}); tracing with {fallback}, "
              "which costs more per call (docs/tracing.md, 'The C hook')", file=sys.stderr)


def fits(module) -> str | None:
    """None when module was built from these sources for this interpreter, else why not."""
    built_for = getattr(module, "PY_VERSION_HEX", None)
    if built_for != sys.hexversion:
        return f"built for Python {_version(built_for)}, this is {_version(sys.hexversion)}"
    digest = build.source_digest()
    if digest is not None and getattr(module, "DIGEST", None) != digest:
        return "built from other sources than these"
    return None


def _load():
    if NAME in sys.modules:
        return sys.modules[NAME]
    installed = _installed_path()
    module = _load_from(installed) if installed is not None else None
    if module is None or fits(module) is not None:
        module = _load_from(build.ensure_built())
        why = fits(module)
        if why is not None:
            raise build.BuildError(f"the cached build {why}")
    sys.modules[NAME] = module
    return module


def _installed_path() -> str | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(build.HERE, build.MODULE + suffix)
        if os.path.exists(path):
            return path
    return None


def _load_from(path: str):
    spec = importlib.util.spec_from_file_location(NAME, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _version(hexversion) -> str:
    if not isinstance(hexversion, int):
        return "an unknown version"
    return f"{hexversion >> 24}.{(hexversion >> 16) & 0xFF}.{(hexversion >> 8) & 0xFF}"
