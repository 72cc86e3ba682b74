"""The C hook (tracing/native/): it writes what the Python recorder writes, its selection table, which builds it
takes, and the fallback to the Python backends when no build can be had.

Its hooks themselves run in test_backends.py (every scenario, 3.10 to 3.13) and, as the default backend, in the
rest of the tracing suite (SIGKILL, fork, torchrun, the hung trainer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import types

import pytest

from tests.support import PYTHON, child_env, run_bounded
from tests.tracing.helpers import pyenv_python
from tests.tracing.test_ring import IDENTITY, loc
from tracing import native
from tracing import ringformat as fmt
from tracing.records import CALL, OPEN, RETURN, UNWIND
from tracing.recorder import Recorder
from tracing.ringreader import read_ring
from tracing.ringwriter import RingWriter
from tracing.streamfile import StreamWriter


def native_module():
    module = native.load()
    if module is None:
        if os.environ.get("CI") == "true":  # CI has a compiler: a hook that does not build is a failure there
            pytest.fail(f"the C hook does not build here, and CI=true: {native.reason()}")
        pytest.skip(f"the C hook does not build here: {native.reason()}")
    return module


def recorder(path, module=None, capacity=64, max_depth=8):
    """A recorder with a ring and a stream file, written by Python (module None) or by the C hook's writer, and
    the selection its emit reads: a dict for Python, the writer's CodeTable for C."""
    meta = {"identity": IDENTITY.to_dict(), "config": {"include": ["x"]}}
    ring = RingWriter(f"{path}.ring", capacity, meta, t0_mono_ns=0, t0_wall_ns=1_700_000_000_000_000_000,
                      max_depth=max_depth)
    stream = StreamWriter(f"{path}.txt", meta)
    selection = module.CodeTable() if module is not None else {}
    return Recorder(ring, stream, t0_mono_ns=0, native=module, table=selection), selection


def play(rec: Recorder, selection) -> None:
    """The same events through either recorder: calls with the caller's line, C calls, a second thread, a gap, a
    stack deeper than the ring keeps, an unwind, and more events than the ring holds."""
    here = sys._getframe()
    selection[here.f_code] = 1  # this function is the selected caller of the calls below
    emit = rec.make_emit(selection)
    c_call, c_return = rec.make_c_hooks(emit)
    a, b = rec.define(loc("a")), rec.define(loc("b"))
    length = rec.c_function_id(len)
    emit(OPEN, a, None, None)
    emit(CALL, b, None, here)  # the line of this statement goes into a's entry
    c_call(length, len, here)
    c_return(print)  # a stray return: ignored
    c_return(len)
    emit(RETURN, b)
    worker = threading.Thread(target=in_worker, args=(emit, a, b, selection), name="worker")
    worker.start()
    worker.join()
    state = rec.states[threading.get_ident()]
    rec.mark_gap(state)
    emit(OPEN, a)
    rec.note_line(state, 123)
    for _ in range(10):  # deeper than max_depth: the ring keeps 8 levels
        emit(CALL, b, None, here)
    emit(UNWIND, b)
    for _ in range(30):  # past the 64-record ring
        emit(CALL, a)
        emit(RETURN, a)
    rec.release()


def in_worker(emit, a, b, selection) -> None:
    here = sys._getframe()
    selection[here.f_code] = 1
    emit(CALL, a)
    emit(CALL, b, None, here)


def ring_without_times(path) -> bytes:
    """The file with what differs between two runs zeroed: the state's time, each record's time and the worker
    threads' ids (each run starts its own)."""
    data = bytearray(open(path, "rb").read())
    head = dict(zip(fmt.FIXED_FIELDS, fmt.FIXED.unpack_from(data, 0)))
    data[fmt.STATE_AT + 8:fmt.STATE_AT + 16] = bytes(8)
    for slot in range(head["max_threads"]):
        at = head["threads_off"] + slot * head["thread_slot_size"]
        data[at:at + 12] = bytes(12)
    for slot in range(head["capacity"]):
        at = head["records_off"] + slot * fmt.RECORD_SIZE
        data[at + 8:at + 16] = bytes(8)
    return bytes(data)


def stream_without_times(path) -> list[str]:
    """Event lines without their time, thread lines without the thread's ids."""
    lines = []
    for line in open(path).read().splitlines():
        if line.startswith("# thread "):
            _, _, index, _ident, _native_id, rest = line.split(" ", 5)
            line = f"# thread {index} {rest}"
        lines.append(line.split(" ", 1)[1] if line[:1].isdigit() else line)
    return lines


def test_the_c_writer_writes_the_same_bytes_as_the_python_recorder(tmp_path):
    module = native_module()
    before = time.perf_counter_ns()
    for name, used in (("py", None), ("c", module)):
        play(*recorder(tmp_path / name, used))
    after = time.perf_counter_ns()
    assert ring_without_times(tmp_path / "c.ring") == ring_without_times(tmp_path / "py.ring")
    assert stream_without_times(tmp_path / "c.txt") == stream_without_times(tmp_path / "py.txt")
    c_trace, py_trace = read_ring(str(tmp_path / "c.ring")), read_ring(str(tmp_path / "py.ring"))
    assert c_trace.total_events == py_trace.total_events == 80 and len(c_trace.events) == 64
    assert [f.line for f in c_trace.main_thread.frames] == [f.line for f in py_trace.main_thread.frames]
    assert "worker" in [t.name for t in c_trace.threads]
    times = [e.wall_ns - c_trace.start_wall_ns for e in c_trace.events]  # t0 was 0: perf_counter_ns itself
    assert before <= min(times) and max(times) <= after  # C reads the clock time.perf_counter_ns reads


def test_a_released_writer_writes_nothing(tmp_path):
    module = native_module()
    rec, _ = recorder(tmp_path / "c", module)
    emit = rec.make_emit()
    code = rec.define(loc("f"))
    emit(CALL, code)
    rec.release()
    emit(CALL, code)  # a late event of another thread while the tracer closes
    rec.ring.close()
    rec.stream.close()
    assert [e.word for e in read_ring(str(tmp_path / "c.ring")).events] == ["call"]


def test_code_table_maps_code_objects_by_identity():
    module = native_module()
    table = module.CodeTable()
    codes = [compile(f"def f{i}(): pass", "<x>", "exec") for i in range(3000)]  # past the first capacity
    for i, code in enumerate(codes):
        table[code] = i % 7
    assert len(table) == 3000 and all(table[c] == i % 7 for i, c in enumerate(codes))
    twin = compile("def f0(): pass", "<x>", "exec")
    assert twin == codes[0] and twin not in table and table.get(twin) is None  # equal is not the same
    assert table.get(twin, -1) == -1 and table.get(codes[1]) == 1
    table[codes[1]] = 5
    assert table[codes[1]] == 5 and len(table) == 3000
    assert sorted(table.items(), key=lambda item: codes.index(item[0]))[:2] == [(codes[0], 0), (codes[1], 5)]
    with pytest.raises(KeyError):
        table[twin]
    with pytest.raises(TypeError):
        table["not code"] = 1
    with pytest.raises(ValueError):
        table[twin] = -1
    with pytest.raises(TypeError):
        del table[codes[0]]


def test_a_build_for_another_interpreter_or_other_sources_is_refused():
    this = types.SimpleNamespace(PY_VERSION_HEX=sys.hexversion, DIGEST=native.build.source_digest())
    assert native.fits(this) is None
    older = types.SimpleNamespace(PY_VERSION_HEX=0x030B04F0, DIGEST=this.DIGEST)
    assert native.fits(older).startswith("built for Python 3.11.4, this is ")
    stale = types.SimpleNamespace(PY_VERSION_HEX=sys.hexversion, DIGEST="0" * 16)
    assert native.fits(stale) == "built from other sources than these"


PROGRAM = "def work():\n    return 1\n\nwork()\n"


def _backend_of(ring) -> str:
    data = open(ring, "rb").read(fmt.HEADER_SIZE)
    head = dict(zip(fmt.FIXED_FIELDS, fmt.FIXED.unpack_from(data, 0)))
    return json.loads(data[fmt.META_AT:fmt.META_AT + head["meta_len"]])["backend"]


@pytest.mark.parametrize("version", ["3.10.13", "3.12.1"])
def test_without_a_compiler_the_python_backends_trace_after_one_warning(tmp_path, version):
    """No build next to the sources for this Python, an empty cache and a compiler that fails: tracing goes on
    with the Python backend, and says so once; asking for the C hook by name is a one-line error."""
    python = pyenv_python(version)
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = child_env(CC="false", HANGDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    done = run_bounded([python, "-m", "tracing", "run", "--include", "__main__", "--out", str(tmp_path / "t"), "--",
                        str(script)], timeout=120, env=env)
    assert done.returncode == 0, done.output
    assert done.stderr.splitlines() == [
        "Warning: hangdoctor tracing has no C hook for this Python (the C compiler failed (false: no output)); "
        f"tracing with {'monitoring' if version >= '3.12' else 'settrace'}, which costs more per call "
        "(docs/tracing.md, 'The C hook')"]
    (ring,) = (tmp_path / "t").glob("trace-*.ring")
    assert _backend_of(ring) == ("monitoring" if version >= "3.12" else "settrace")
    assert [(e.word, e.loc.qualname) for e in read_ring(str(ring)).events] == [("call", "<module>"),
                                                                                ("call", "work"), ("ret", "work"),
                                                                                ("ret", "<module>")]
    refused = run_bounded([python, "-m", "tracing", "run", "--include", "__main__", "--backend", "c", "--out",
                           str(tmp_path / "t2"), "--", str(script)], timeout=120, env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.output
    assert refused.stderr.splitlines() == ["Error: backend 'c' cannot be used with this Python: the C compiler "
                                           "failed (false: no output)"]


def test_ranks_starting_together_build_once_and_later_ones_load_it(tmp_path):
    """A Python with no build next to the sources compiles one into the cache on first use: three processes that
    start at once (the ranks of a node) wait for one compiler run, and a later process loads its result."""
    python = pyenv_python("3.13.0")
    env = child_env(HANGDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    probe = [python, "-c", "from tracing import native; m = native.load(); print(m.__file__ if m else native.reason())"]
    ranks = [subprocess.Popen(probe, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    try:
        outputs = [rank.communicate(timeout=300) for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
    assert [rank.returncode for rank in ranks] == [0, 0, 0], outputs
    (path,) = {out.strip() for out, _ in outputs}
    assert path.startswith(str(tmp_path / "cache")) and os.path.basename(path).startswith("_ctrace.cpython-313")
    assert sorted(os.listdir(os.path.dirname(path))) == [".lock", os.path.basename(path)]  # one build, no leftovers
    built = os.stat(path).st_mtime_ns
    later = run_bounded(probe, timeout=60, env=env)
    assert later.returncode == 0 and later.stdout.strip() == path, later.output
    assert os.stat(path).st_mtime_ns == built  # loaded, not built again


FAILING_CLASSIFY = """
import sys, tracing
def boom():
    return "ran"
tracer = tracing.trace(include="__main__", out=sys.argv[1], backend="c")
real = tracer._classify
def classify(code):
    if code.co_name == "boom":
        raise RuntimeError("classify failed")
    return real(code)
tracer._classify = classify  # before start: the hook takes it then
with tracer:
    print(boom(), tracer.status)
"""


@pytest.mark.parametrize("version", [None, "3.12.1"])
def test_a_failing_hook_stops_tracing_and_the_program_goes_on(tmp_path, version):
    """An error inside the hook (here the tracer's classification) stops tracing with one warning; the program
    never sees it (the hook, ended from inside itself, is not used after it is let go)."""
    python = PYTHON if version is None else pyenv_python(version)
    script = tmp_path / "prog.py"
    script.write_text(FAILING_CLASSIFY)
    done = run_bounded([python, str(script), str(tmp_path / "t")], timeout=120, env=child_env())
    assert done.returncode == 0, done.output
    assert done.stdout.split() == ["ran", "stopped"]
    assert done.stderr.splitlines() == [
        "Warning: hangdoctor tracing stopped after an internal error: RuntimeError('classify failed')"]
