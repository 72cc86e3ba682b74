"""Bad input through the real command, one table row per input: the exit code, exactly one `Error:` line (plus at
most a `Hint:`) or, where the rest is still readable, one `Warning:` line naming the file, and never a traceback.
Every run is bounded (timeout=60), so a reader that blocks on a FIFO fails instead of hanging.

docs/tracing.md ("Bad input") quotes the number of rows: keep it in step.
"""

from __future__ import annotations

import json
import os
import random
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import PYTHON, child_env, run_bounded
from tests.tracing.helpers import FIXTURES, Background, pyenv_python, tracing_cli
from tests.tracing.test_ring import loc, make_recorder
from tracing import ringformat as fmt
from tracing.records import CALL, EXITED, GAP_TEXT, GAP_WARNING, RETURN
from tracing.ringreader import read_ring


def write_ring(path: Path) -> Path:
    """A small, valid ring: outer > inner open, a few events."""
    rec = make_recorder(path, capacity=64)
    emit = rec.make_emit()
    outer, inner = rec.define(loc("outer")), rec.define(loc("inner"))
    for kind, code in ((CALL, outer), (CALL, inner), (RETURN, inner), (CALL, inner)):
        emit(kind, code)
    rec.ring.set_state(EXITED, exit_code=0)
    rec.ring.close()
    return path


def patch(path: Path, edit: Callable[[bytearray, dict], None]) -> Path:
    data = bytearray(path.read_bytes())
    edit(data, dict(zip(fmt.FIXED_FIELDS, fmt.FIXED.unpack_from(data, 0))))
    path.write_bytes(bytes(data))
    return path


def random_body(data: bytearray, head: dict) -> None:
    data[fmt.HEADER_SIZE:] = random.Random(13).randbytes(len(data) - fmt.HEADER_SIZE)


def binary_thread_name(data: bytearray, head: dict) -> None:
    at = head["threads_off"] + 16  # slot 0: ident, native_id, flags, then the name
    data[at:at + 48] = bytes(range(200, 248))


def record_code_id(code_id: int, seq: int = 1) -> Callable[[bytearray, dict], None]:
    def edit(data: bytearray, head: dict) -> None:  # both seq copies stay right: not a torn write
        struct.pack_into("<I", data, head["records_off"] + seq * fmt.RECORD_SIZE + 16, code_id)
    return edit


def foreign_record(data: bytearray, head: dict) -> None:
    at = head["records_off"] + 40 * fmt.RECORD_SIZE  # an unused slot: zeros, now something that is no record
    data[at:at + fmt.RECORD_SIZE] = bytes(range(1, 33))


def torn_newest(data: bytearray, head: dict) -> None:
    struct.pack_into("<I", data, head["records_off"] + 3 * fmt.RECORD_SIZE + 28, 999)  # stale trailing seq copy


def header_field(name: str, value: int) -> Callable[[bytearray, dict], None]:
    def edit(data: bytearray, head: dict) -> None:
        head[name] = value
        fmt.FIXED.pack_into(data, 0, *(head[f] for f in fmt.FIXED_FIELDS))
    return edit


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@dataclass
class Case:
    name: str
    setup: Callable[[Path], list[str]]  # makes the input under tmp_path and returns the command's arguments
    code: int
    message: str  # in the one Error (or Warning) line
    warning: bool = False  # the command still works: one Warning line instead of an Error


def ring_in(tmp: Path, edit=None, name: str = "trace-h-0-1.ring") -> Path:
    path = write_ring(tmp / name)
    return patch(path, edit) if edit else path


def folder_with(*makers: Callable[[Path], object]) -> Callable[[Path], str]:
    """A setup piece: run each maker on the folder, then name the folder."""
    def make(tmp: Path) -> str:
        for maker in makers:
            maker(tmp)
        return str(tmp)
    return make


def file_with(name: str, content: bytes) -> Callable[[Path], str]:
    def make(tmp: Path) -> str:
        (tmp / name).write_bytes(content)
        return str(tmp / name)
    return make


FIFO_RING = folder_with(lambda t: fifo(t / "trace-h-0-1.ring"))
RANDOM_RING = folder_with(lambda t: ring_in(t, random_body))


def damaged_show(edit) -> Callable[[Path], list[str]]:
    return lambda t: ["show", str(ring_in(t, edit))]


def cut_at(size: int) -> Callable[[bytearray, dict], None]:
    return lambda data, head: data.__delitem__(slice(size, None))


def garbage_identity(data: bytearray, head: dict) -> None:
    data[fmt.META_AT:fmt.META_AT + 8] = b"{{{{{{{{"


CASES = [
    # 8: a FIFO (or another file that is no regular file) named like a trace file never blocks a reader
    Case("fifo-ring-last", lambda t: ["last", FIFO_RING(t)], 3,
         "{t}/trace-h-0-1.ring: not a regular file but a FIFO (named pipe); trace files are regular files"),
    Case("fifo-ring-show", lambda t: ["show", str(fifo(t / "trace-h-0-1.ring"))], 3, "not a regular file but a FIFO"),
    Case("fifo-ring-path-last", lambda t: ["last", str(fifo(t / "trace-h-0-1.ring"))], 3, "but a FIFO"),
    Case("fifo-stream-diverge", lambda t: ["diverge", folder_with(lambda t: fifo(t / "trace-h-0-1.txt"))(t)], 3,
         "{t}/trace-h-0-1.txt: not a regular file but a FIFO"),
    Case("fifo-export", lambda t: ["export", FIFO_RING(t), "-o", str(t / "o.json")], 3, "but a FIFO"),
    Case("device-show", lambda t: ["show", "/dev/null"], 3, "/dev/null: not a regular file but a character device"),
    Case("folder-show", lambda t: ["show", str(t)], 3, "{t}: not a regular file but a folder"),
    Case("missing", lambda t: ["last", str(t / "nope")], 3, "{t}/nope: no such file or folder"),
    # 13: a ring whose body is random bytes, or that is damaged in one place, or whose header is
    Case("random-body-last", lambda t: ["last", RANDOM_RING(t)], 3, "{t}/trace-h-0-1.ring: damaged ring, nothing in "
         "it is valid (failed validation: the string table from byte 0 of 88, 64 of 64 thread slot(s), "),
    Case("random-body-show", lambda t: ["show", str(ring_in(t, random_body))], 3, "nothing in it is valid"),
    Case("random-body-diverge", lambda t: ["diverge", RANDOM_RING(t)], 3, "nothing in it is valid"),
    Case("random-body-beside-good", lambda t: ["last", folder_with(RANDOM_RING, lambda t: write_ring(
        t / "trace-h-0-2.ring"))(t), "--json"], 0, "skipped {t}/trace-h-0-1.ring: damaged ring, nothing", warning=True),
    Case("binary-thread-name", damaged_show(binary_thread_name), 0,
         "{t}/trace-h-0-1.ring: damaged ring, skipped what failed validation: 1 of 64 thread slot(s)", warning=True),
    Case("code-id-beyond-table", damaged_show(record_code_id(4000)), 0,
         "{t}/trace-h-0-1.ring: damaged ring, skipped what failed validation: 1 record(s)", warning=True),
    Case("foreign-record-slot", lambda t: ["last", str(ring_in(t, foreign_record).parent)], 0,
         "{t}/trace-h-0-1.ring: damaged ring, skipped what failed validation: 1 record(s)", warning=True),
    Case("header-offsets", damaged_show(header_field("threads_off", 12345)), 3,
         "damaged ring header (its region offsets do not add up)"),
    Case("header-version", damaged_show(header_field("version", 9)), 3, "ring format version 9"),
    Case("header-identity", damaged_show(garbage_identity), 3, "unreadable identity in the header"),
    Case("empty-ring", lambda t: ["show", file_with("trace-h-0-1.ring", b"")(t)], 3, "empty ring file"),
    Case("truncated-ring", damaged_show(cut_at(5000)), 3, "truncated ring file: 5000 bytes"),
    Case("stream-garbage", lambda t: ["show", file_with("trace-h-0-1.txt", b"\xff\x00" * 100000)(t)], 3,
         "not a hangdoctor stream trace"),
    # 15: `env` refuses what the tracer would refuse, instead of printing settings that leave tracing off
    Case("env-out-semicolon", lambda t: ["env", "--include", "x", "--out", str(t / "dir;x")], 2,
         "Error: out='{t}/dir;x': ';' separates the settings in HANGDOCTOR_TRACE, so no value can hold one"),
    Case("env-include-semicolon", lambda t: ["env", "--include", "x;y", "--out", str(t)], 2, "include='x;y': ';'"),
    Case("env-start-at-semicolon", lambda t: ["env", "--include", "x", "--start-at", "a;b"], 2, "start_at='a;b'"),
    Case("env-out-trailing-space", lambda t: ["env", "--include", "x", "--out", str(t / "dir ")], 2,
         "drops leading and trailing spaces"),
    Case("env-out-is-a-file", lambda t: ["env", "--include", "x", "--out", str(ring_in(t))], 2,
         "exists and is not a folder"),
    Case("env-bad-pattern", lambda t: ["env", "--include", ":x"], 2, "selection pattern ':x' has no module"),
    Case("env-bad-start-at", lambda t: ["env", "--include", "x", "--start-at", "pkg:"], 2, "expected a function name"),
    Case("env-settrace-c-calls", lambda t: ["env", "--include", "x", "--backend", "settrace", "--c-calls"], 2,
         "backend 'settrace' cannot see C calls"),
    Case("env-bad-ranks", lambda t: ["env", "--include", "x", "--ranks", "3-1"], 2, "bad rank range '3-1'"),
    # flags
    Case("negative-tail", lambda t: ["show", str(ring_in(t)), "--tail", "-1"], 2, "argument --tail: -1 is negative"),
    Case("word-events", lambda t: ["last", str(t), "--events", "x"], 2, "argument --events: 'x' is not an integer"),
    Case("small-ring", lambda t: ["run", "--include", "x", "--ring", "3", "--", "a.py"], 2, "at least 16 events"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_gives_one_line(tmp_path, case):
    args = case.setup(tmp_path)
    done = tracing_cli(*args, timeout=60)
    assert done.returncode == case.code, done.output
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("Hint: ")]
    word = "Warning: " if case.warning else "Error: "
    assert len(lines) == 1 and lines[0].startswith(word), done.stderr
    assert case.message.format(t=tmp_path) in lines[0], lines[0]
    if case.warning:
        assert done.stdout.strip()  # the rest was still read and shown


def test_torn_tail_is_not_damage(tmp_path):
    """A record torn by SIGKILL mid-write is skipped without a warning, as before."""
    done = tracing_cli("show", str(ring_in(tmp_path, torn_newest)), timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.output
    assert "3 events, 0 no longer in the file" in done.stdout


def test_show_tail_leaves_events_out_of_the_view_not_out_of_the_file(tmp_path):
    """`show --tail 2` on a ring that keeps all 4 events said "2 no longer in the file" (sweep round 2)."""
    done = tracing_cli("show", str(ring_in(tmp_path)), "--tail", "2", timeout=60)
    assert done.returncode == 0, done.output
    assert "4 events, 0 no longer in the file, the newest 2 of the 4 in it shown (--tail 2)" in done.stdout


def test_what_env_prints_turns_tracing_on(tmp_path):
    """The exports `env` prints start the tracer in a fresh interpreter (a folder with spaces inside is fine)."""
    out = tmp_path / "my traces"
    done = tracing_cli("env", "--include", "__main__, other", "--out", str(out), "--start-at", "main")
    assert done.returncode == 0, done.output
    script = tmp_path / "prog.py"
    script.write_text("def main():\n    return 1\n\nmain()\n")
    shell = run_bounded(["bash", "-c", f'{done.stdout}\nexec "$0" "$1"', PYTHON, str(script)], timeout=60,
                        env=child_env())
    assert shell.returncode == 0 and "Warning" not in shell.stderr, shell.output
    (ring,) = out.glob("trace-*.ring")
    events = [(e.word, e.loc.qualname) for e in read_ring(str(ring)).events]
    started = "call" if _frame_hook_here() else "open"  # the frame hook sees main before it starts
    assert events == [("open", "<module>"), (started, "main"), ("ret", "main"), ("ret", "<module>")]


def _frame_hook_here() -> bool:
    """Whether `auto` gives the C frame-evaluation hook in this Python (the C hook, before 3.12)."""
    from tracing.backends import resolve_backend
    return sys.version_info < (3, 12) and resolve_backend("auto", False) == "c"


# 21: a RecursionError in traced code. Before 3.12 CPython drops the sys.settrace / sys.setprofile hook when calling
# it overflows; the tracer puts it back, records a gap, and `last` does not report the frames that returned meanwhile.
# The C hook (a frame-evaluation function before 3.12, sys.monitoring after) loses nothing there.
GAP_COMBOS = [(None, "settrace", ""), (None, "setprofile", ""), ("3.10.13", "settrace", ""),
              ("3.10.13", "setprofile", ""), ("3.12.1", "monitoring", ""),
              (None, "c", ""), ("3.10.13", "c", "nogc"), ("3.12.1", "c", ""),
              # gc off: the hook cannot come back, the watch thread records the gap from outside (hookwatch.py)
              (None, "settrace", "nogc"), ("3.10.13", "setprofile", "nogc"), ("3.12.1", "settrace", "nogc")]


def _hanging(out: Path) -> bool:
    rings = list(out.glob("trace-*.ring"))
    try:
        thread = read_ring(str(rings[0])).main_thread if rings else None
    except ValueError:  # not written yet
        return False
    return bool(thread and thread.open_frames and thread.open_frames[-1].qualname == "hang")


@pytest.mark.parametrize(("version", "backend", "mode"), GAP_COMBOS,
                         ids=[f"{v or 'venv'}-{b}{'-' + m if m else ''}" for v, b, m in GAP_COMBOS])
def test_recursion_error_leaves_a_gap_not_stale_frames(tmp_path, version, backend, mode):
    python = PYTHON if version is None else pyenv_python(version)
    out = tmp_path / "traces"
    with Background() as bg:
        bg.start([python, "-m", "tracing", "run", "--include", "__main__", "--backend", backend, "--out", str(out),
                  "--", str(FIXTURES / "recursion_gap.py"), "hang", *([mode] if mode else [])], env=child_env())
        bg.wait_for(lambda: _hanging(out), 60, "the fixture hanging in hang()")
        (ring,) = out.glob("trace-*.ring")
        last = tracing_cli("last", str(out), "--json", timeout=60)
        shown = tracing_cli("show", str(ring), timeout=60)
    for done in (last, shown):
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.output
    main = json.loads(last.stdout)["ranks"][0]["threads"][0]
    assert [f["qualname"] for f in main["open_frames"]] == ["<module>", "main", "hang"]  # not overflow > recurse...
    # "[MainThread] 12:00:00.000  call      hang  recursion_gap.py:38" -> "call      hang"
    lines = [line.split("  ", 1)[1].rsplit("  ", 1)[0].strip() for line in shown.stdout.splitlines()
             if line.startswith("[MainThread]")]
    gaps = [i for i, line in enumerate(lines) if line.startswith("gap")]
    if backend in ("monitoring", "c"):  # no hook that CPython drops: nothing was lost
        assert gaps == [] and last.stderr == shown.stderr == ""
    else:
        assert len(gaps) == 1, lines
        assert f"  gap   {GAP_TEXT}\n" in shown.stdout
        assert lines[gaps[0] + 1].startswith("open  <module>")  # the stack as it was when tracing resumed
        for done in (last, shown):
            assert done.stderr.splitlines() == [f"Warning: {ring}: {GAP_WARNING}"]
    if mode == "nogc" and gaps:  # the hook stayed off: the frames open at the hang were recorded from outside
        assert lines[gaps[0] + 1:] == ["open  <module>", "open    main", "open      hang"]
    else:  # tracing went on: the calls after the error are recorded
        later = lines.index("call      recorded_later")
        assert lines[-1] == "call      hang" and (not gaps or gaps[0] < later)
