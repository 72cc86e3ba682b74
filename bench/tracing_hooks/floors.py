"""The floor of each hook CPython offers: installed, doing nothing, over code the tracer would not select.

    floor:settrace      sys.settrace with a Python function that returns None (the old backend's unselected cost)
    floor:profile-c     PyEval_SetProfile with a C function that returns at once (noophooks.c)
    floor:trace-c       PyEval_SetTrace with that C function
    floor:evalframe-c   a frame-evaluation function (PEP 523) handing every frame to CPython's (3.10/3.11 here)
    floor:monitoring    sys.monitoring PY_START returning DISABLE (3.12+)

noophooks.c is compiled once by the parent (build()) with tracing's own compiler settings; the children find it
through BENCH_NOOPHOOKS.
"""

from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = "BENCH_NOOPHOOKS"


def available() -> tuple[str, ...]:
    names = ["settrace", "profile-c", "trace-c"]
    names.append("monitoring" if sys.version_info >= (3, 12) else "evalframe-c")
    return tuple(f"floor:{name}" for name in names)


def build(folder: str) -> None:
    """Compile noophooks.c for this Python into folder and tell the children where it is."""
    import sysconfig

    from tracing.native.build import compile_to
    output = os.path.join(folder, "noophooks" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    compile_to(output, sources=[os.path.join(HERE, "noophooks.c")], digest="bench")
    os.environ[ENV] = output


def install(mode: str) -> None:
    kind = mode.removeprefix("floor:")
    if kind == "settrace":
        sys.settrace(lambda frame, event, arg: None)
    elif kind == "monitoring":
        monitoring = sys.monitoring
        monitoring.use_tool_id(4, "floor")
        monitoring.register_callback(4, monitoring.events.PY_START, lambda code, offset: monitoring.DISABLE)
        monitoring.set_events(4, monitoring.events.PY_START)
    else:
        spec = importlib.util.spec_from_file_location("noophooks", os.environ[ENV])
        hooks = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(hooks)
        getattr(hooks, kind.removesuffix("-c"))()
