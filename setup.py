"""Builds tracing's C hook at install time, for the installing Python; the install goes on without it.

Everything else about the distribution is in pyproject.toml. The hook is optional: when it cannot be compiled
here (no compiler, no Python headers), setuptools prints a warning and installs the rest, and tracing compiles it
on first use for whichever Python runs it, or falls back to its pure-Python backends (tracing/native/). The C
sources ship as package data so that an installed copy can compile for other interpreters too.
"""

import importlib.util
import os

from setuptools import Extension, setup

# build.py by path: importing the tracing package here would need its dependencies in the build environment.
_spec = importlib.util.spec_from_file_location("_tracing_native_build", os.path.join("tracing", "native", "build.py"))
_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_build)

setup(
    ext_modules=[Extension(
        "tracing.native._ctrace",
        sources=[f"tracing/native/{name}" for name in _build.SOURCES if name.endswith(".c")],
        depends=[f"tracing/native/{name}" for name in _build.SOURCES if name.endswith(".h")],
        define_macros=[("CTRACE_DIGEST", f'"{_build.source_digest()}"')],
        optional=True,
    )],
    package_data={"tracing.native": ["*.c", "*.h"]},
)
