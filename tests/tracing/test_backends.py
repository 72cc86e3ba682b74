"""Every backend on every Python it supports, in a fresh interpreter each time (the 3.12/3.13 runs need no torch).

fixtures/exercise.py runs one scenario and prints the events it read back from its ring file.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest

from tests.support import PYTHON, child_env, run_bounded
from tests.tracing.helpers import FIXTURES, pyenv_python

# (python, backend): the project's Python (3.11), then pyenv's others. "c" is the C hook (tracing/native/),
# compiled for each of them on first use: a frame-evaluation hook before 3.12, sys.monitoring callbacks after.
COMBOS = [
    (None, "c"), (None, "settrace"), (None, "setprofile"),
    ("3.10.13", "c"), ("3.10.13", "settrace"), ("3.10.13", "setprofile"),
    ("3.12.1", "c"), ("3.12.1", "monitoring"), ("3.12.1", "settrace"), ("3.12.1", "setprofile"),
    ("3.13.0", "c"), ("3.13.0", "monitoring"),
]
SCENARIOS = ["selection", "exclusion", "shapes", "threads", "start_at", "stop_start", "c_calls", "lines",
             "open_returns", "throw_first"]


def exercise(version: str | None, backend: str, scenario: str, tmp_path) -> dict:
    python = PYTHON if version is None else pyenv_python(version)
    done = run_bounded([python, str(FIXTURES / "exercise.py"), scenario, backend, str(tmp_path)], timeout=60,
                       env=child_env())
    assert done.returncode == 0, done.output
    result = json.loads(done.stdout)
    assert result["backend"] == backend
    assert result["state"] == "stopped"
    return result


def _minor(version: str | None) -> int:
    return sys.version_info[1] if version is None else int(version.split(".")[1])


def _covers_running_threads(version: str | None, backend: str) -> bool:
    return backend in ("monitoring", "c") or _minor(version) >= 12


def _frame_hook(version: str | None, backend: str) -> bool:
    """The C hook before 3.12 (PEP 523): hears the start of every frame, but not the return of a frame that
    was already running when tracing started."""
    return backend == "c" and _minor(version) < 12


# settrace cannot see C calls, nor can the C hook before 3.12: the tracer refuses those combinations
# (test_settrace_refuses_c_calls), so they are no scenario to run.
CASES = [(v, b, s) for v, b in COMBOS for s in SCENARIOS
         if not (s == "c_calls" and (b == "settrace" or _frame_hook(v, b)))]


def test_settrace_refuses_c_calls():
    from tracing.backends import resolve_backend

    with pytest.raises(ValueError, match="backend 'settrace' cannot see C calls"):
        resolve_backend("settrace", c_calls=True)
    assert resolve_backend("auto", c_calls=True) in ("setprofile", "c", "monitoring")
    if sys.version_info < (3, 12):
        with pytest.raises(ValueError, match="backend 'c' sees C calls on Python 3.12\\+ only"):
            resolve_backend("c", c_calls=True)


@pytest.mark.parametrize(("version", "backend", "scenario"), CASES, ids=[f"{v or 'venv'}-{b}-{s}" for v, b, s in CASES])
def test_backend_scenario(version, backend, scenario, tmp_path):
    result = exercise(version, backend, scenario, tmp_path)
    events = [tuple(e[:4]) for e in result["events"]]
    words = [(kind, name) for kind, name, _, _ in events]
    opening = [("open", "<module>", 0, "MainThread"), ("open", "main", 1, "MainThread"),
               ("open", "scenario", 2, "MainThread")]
    assert {e[4] for e in result["events"] if e[0] not in ("ccall", "cret")} == {"__main__"}
    if scenario == "selection":
        assert events[:3] == opening
        counts = Counter(words)
        assert counts[("call", "outer")] == counts[("ret", "outer")] == 20
        assert counts[("call", "callback")] == counts[("ret", "callback")] == 20
        assert {name for _, name in words} == {"<module>", "main", "scenario", "outer", "callback"}
        # callback is called from the unselected library, which adds no level: it sits right under outer.
        assert {d for k, n, d, _ in events if n == "callback"} == {4}
        if backend == "monitoring":
            # 1000 calls of the unselected libmod.inner, yet its code reached the callbacks at most a few times:
            # DISABLE switched it off after its first PY_START and PY_RETURN.
            assert result["extra"]["lookups"]["inner"] <= 4
    elif scenario == "exclusion":
        assert events == opening + [("call", "uses_excluded", 3, "MainThread"), ("ret", "uses_excluded", 3, "MainThread")]
    elif scenario == "shapes":
        left = "exc" if backend in ("monitoring", "c") else "ret"
        assert events == opening + [("call", "shapes", 3, "MainThread")] + [
            ("call", "gen", 4, "MainThread"), ("ret", "gen", 4, "MainThread")] * 4 + [
            ("call", "raises", 4, "MainThread"), (left, "raises", 4, "MainThread"), ("ret", "shapes", 3, "MainThread")]
    elif scenario == "threads":
        late = [e for e in events if e[3] == "late"]
        assert late == [("call", "callback", 0, "late"), ("ret", "callback", 0, "late")]
        early = [e for e in events if e[3] == "early"]
        if _frame_hook(version, backend):  # in_thread was running at the start: its return is not heard
            assert early == [("open", "in_thread", 0, "early"), ("call", "callback", 1, "early"),
                             ("ret", "callback", 1, "early")]
        elif _covers_running_threads(version, backend):
            assert early == [("open", "in_thread", 0, "early"), ("call", "callback", 1, "early"),
                             ("ret", "callback", 1, "early"), ("ret", "in_thread", 0, "early")]
        else:  # before 3.12 a running thread cannot be hooked from Python
            assert early == []
    elif scenario == "start_at":
        # The frame hook sees target before it starts: a call. enclosing started while the hook waited for target,
        # so every backend hears it return.
        started = "call" if _frame_hook(version, backend) else "open"
        assert events == opening + [
            ("open", "enclosing", 3, "MainThread"), (started, "target", 4, "MainThread"),
            ("call", "before_target", 5, "MainThread"), ("ret", "before_target", 5, "MainThread"),
            ("ret", "target", 4, "MainThread"),
            ("call", "before_target", 4, "MainThread"), ("ret", "before_target", 4, "MainThread"),
            ("ret", "enclosing", 3, "MainThread")]
    elif scenario == "stop_start":
        assert events == opening + [("call", "callback", 3, "MainThread"), ("ret", "callback", 3, "MainThread")] \
            + opening + [("call", "target", 3, "MainThread"), ("call", "before_target", 4, "MainThread"),
                         ("ret", "before_target", 4, "MainThread"), ("ret", "target", 3, "MainThread")]
    elif scenario == "lines":
        # Each open frame's executing line (the line marked "# LINE <its name>" in exercise.py), read while
        # open; the innermost frame has the line of its last call of selected code.
        marks = {line.rsplit("# LINE ", 1)[1].split(":")[0]: n
                 for n, line in enumerate((FIXTURES / "exercise.py").read_text().splitlines(), 1) if "# LINE " in line}
        names = ["<module>", "main", "scenario", "lines_outer", "lines_middle", "lines_inner"]
        expected = [[name, marks[name.removeprefix("lines_")], "executing"] for name in names]
        expected[-1][2] = "last call"
        assert result["extra"]["frames"] == expected
    elif scenario == "throw_first":
        left = "exc" if backend in ("monitoring", "c") else "ret"
        assert result["extra"]["caught"] == "KeyError('x')"  # the program's exception, untouched by the hook
        assert events == opening + [("call", "fresh_gen", 3, "MainThread"), (left, "fresh_gen", 3, "MainThread")]
    elif scenario == "open_returns":
        # The same events from every backend; the frame hook records starts_tracing's return when the next call
        # under scenario shows that it no longer runs.
        assert events == opening + [
            ("open", "starts_tracing", 3, "MainThread"), ("ret", "starts_tracing", 3, "MainThread"),
            ("call", "callback", 3, "MainThread"), ("ret", "callback", 3, "MainThread")]
    elif scenario == "c_calls":
        assert ("ccall", "len", 4, "MainThread") in events
        assert events.index(("ccall", "len", 4, "MainThread")) + 1 == events.index(("cret", "len", 4, "MainThread"))
        assert events[-1] == ("ret", "uses_excluded", 3, "MainThread")
