"""Starts hangdoctor's tracer in any Python whose environment has HANGDOCTOR_TRACE (see tracing/autostart.py).

Python imports `sitecustomize` at startup from the first folder on sys.path that has one; `python -m tracing
env` puts this folder first on PYTHONPATH. Afterwards the next sitecustomize on the path, if any (a distribution
or a virtualenv may ship one), is run too, so putting this folder first takes nothing away.
"""

import os
import sys


def _start() -> None:
    if not os.environ.get("HANGDOCTOR_TRACE"):
        return
    try:
        from tracing.autostart import start_from_environment
    except ImportError:  # hangdoctor is not installed: use the checkout this file lives in
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        sys.path.append(root)
        try:
            from tracing.autostart import start_from_environment
        except ImportError as e:
            print(f"Warning: HANGDOCTOR_TRACE is set but tracing cannot be imported: {e}", file=sys.stderr)
            return
    start_from_environment()


def _run_next_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_start()
_run_next_sitecustomize()
