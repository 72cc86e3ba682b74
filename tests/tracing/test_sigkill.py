"""A rank killed with SIGKILL keeps its ring buffer, its stream file and its Tee file, up to the last complete
event or line."""

from __future__ import annotations

import random
import signal
import time

import pytest

from tests.support import PYTHON, child_env, run_bounded
from tests.tracing.helpers import FIXTURES, Background, pyenv_python
from tracing.records import CALL, OPEN, RUNNING
from tracing.ringreader import read_ring
from tracing.streamfile import read_stream


def run_killed(tmp_path, ring: int, lines: int = 1000):
    out = tmp_path / "traces"
    done = run_bounded([PYTHON, "-m", "tracing", "run", "--include", "__main__", "--ring", str(ring), "--stream",
                        "--tee", "--out", str(out), "--", str(FIXTURES / "killed.py")],
                       timeout=60, env=child_env(LINES=str(lines)))
    assert done.returncode == -signal.SIGKILL, done.output
    return out


def test_ring_stream_and_tee_survive_sigkill(tmp_path):
    out = run_killed(tmp_path, ring=65536)
    (ring_file,) = out.glob("trace-*.ring")
    (stream_file,) = out.glob("trace-*.txt")
    (tee_file,) = out.glob("stdout-*.txt")
    expected = ["<module>", "main"] + ["work", "work"] * 1000 + ["die"]

    ring = read_ring(str(ring_file))
    assert ring.warnings == []
    assert ring.state == RUNNING  # no exit was recorded: the process never got to say goodbye
    assert [e.loc.qualname for e in ring.events] == expected
    assert [e.seq for e in ring.events] == list(range(len(expected)))
    assert ring.events[-1].kind == CALL
    assert [f.qualname for f in ring.main_thread.open_frames] == ["<module>", "main", "die"]

    stream = read_stream(str(stream_file))
    assert [e.loc.qualname for e in stream.events] == expected
    assert stream_file.read_text().endswith("__main__:die killed.py:14\n")
    assert [f.qualname for f in stream.main_thread.open_frames] == ["<module>", "main", "die"]

    # Every complete line is in the Tee file; the unfinished one was still in the line buffer.
    assert tee_file.read_text() == "".join(f"line {i}\n" for i in range(1000))


def test_small_ring_keeps_newest_events_and_all_open_frames(tmp_path):
    out = run_killed(tmp_path, ring=64)
    ring = read_ring(str(next(out.glob("trace-*.ring"))))
    assert ring.total_events == 2003
    assert [e.seq for e in ring.events] == list(range(2003 - 64, 2003))
    assert ring.events[-1].loc.qualname == "die"
    # `main` was entered 2000 events before the end, far outside the ring: its frame comes from the stack slots.
    assert [f.qualname for f in ring.main_thread.open_frames] == ["<module>", "main", "die"]


def _replayed_stack(events) -> tuple[dict[int, str], int]:
    """Frames known from the events (depth -> name; the window may start mid-stack) and the depth after them."""
    stack: dict[int, str] = {}
    depth = 0
    for e in events:
        for d in [d for d in stack if d >= e.depth]:
            del stack[d]
        if e.kind in (CALL, OPEN):
            stack[e.depth] = e.loc.qualname
            depth = e.depth + 1
        else:
            depth = e.depth
    return stack, depth


def test_killed_at_random_moments_files_stay_consistent(tmp_path):
    """Kill a process that traces as fast as it can at random moments: every record read back is whole, the
    sequence has no holes, and the open frames agree with the last events (up to the one event in flight)."""
    rng = random.Random(5)
    for attempt in range(4):
        out = tmp_path / f"run{attempt}"
        out.mkdir()
        with Background() as bg:
            proc = bg.start([PYTHON, str(FIXTURES / "churn.py"), str(out)], env=child_env())
            bg.wait_for(lambda: (out / "started").exists(), 60, "the churn fixture starting")
            time.sleep(rng.uniform(0.05, 0.4))
            bg.kill(proc)
        ring = read_ring(str(next(out.glob("trace-*.ring"))))
        assert ring.warnings == []  # a write torn by the kill is not damage
        seqs = [e.seq for e in ring.events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        assert seqs[-1] == ring.total_events - 1 and len(seqs) >= 4096 - 1
        thread = ring.main_thread
        known, depth = _replayed_stack(thread.events)
        frames = [f.qualname for f in thread.open_frames]
        # The stack slot is written just before the record: one call or return may be in flight.
        assert abs(len(frames) - depth) <= 1, (frames, known, depth)
        for level, name in known.items():
            if level < min(len(frames), depth):
                assert frames[level] == name, (level, frames, known)
        assert frames[:2] == ["<module>", "churn"]
        assert set(frames[2:]) <= {"descend"}
        stream = read_stream(str(next(out.glob("trace-*.txt"))))
        # The stream is written after the ring record, so it holds the same events or one fewer.
        assert ring.total_events - stream.total_events in (0, 1)


@pytest.mark.parametrize("version", [None, "3.12.1"], ids=lambda v: v or "venv")
def test_forked_child_leaves_the_parents_files_alone(tmp_path, version):
    python = PYTHON if version is None else pyenv_python(version)
    done = run_bounded([python, str(FIXTURES / "forks.py"), str(tmp_path)], timeout=60, env=child_env())
    assert done.returncode == 0, done.output
    for reader, pattern in ((read_ring, "*.ring"), (read_stream, "*.txt")):
        (path,) = tmp_path.glob(pattern)
        trace = reader(str(path))
        assert [(e.word, e.loc.qualname) for e in trace.events] == [
            ("open", "<module>"), ("call", "in_parent"), ("ret", "in_parent")]
        assert trace.state_word == "stopped"
