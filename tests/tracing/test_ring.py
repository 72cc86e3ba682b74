"""The call-ring file format: what the recorder writes is what the reader returns, wrap-around keeps the
newest events, torn records are refused, full tables degrade gracefully."""

from __future__ import annotations

import struct
import threading

from tests.tracing.helpers import FIXTURES
from tracing import ringformat as fmt
from tracing.identity import RankIdentity
from tracing.records import CALL, EXITED, GAP_LOCATION, GAP_WARNING, OPEN, RETURN, CodeLocation
from tracing.recorder import OVERFLOW_THREAD, Recorder
from tracing.ringreader import read_ring
from tracing.ringwriter import RingWriter
from tracing.streamfile import StreamWriter, read_stream

IDENTITY = RankIdentity(rank=3, local_rank=1, world_size=8, host="node7", pid=4242, rank_source="RANK",
                        argv=("python", "train.py"))


def make_recorder(path, capacity=64, **sizes) -> Recorder:
    meta = {"identity": IDENTITY.to_dict(), "config": {"include": ["x"]}}
    ring = RingWriter(str(path), capacity, meta, t0_mono_ns=0, t0_wall_ns=1_700_000_000_000_000_000, **sizes)
    return Recorder(ring, None, t0_mono_ns=0)


def loc(name: str) -> CodeLocation:
    return CodeLocation("pkg.mod", name, "/src/pkg/mod.py", 10)


def test_round_trip_identity_locations_events_and_open_frames(tmp_path):
    rec = make_recorder(tmp_path / "r.ring")
    emit = rec.make_emit()
    outer, inner = rec.define(loc("Outer.run")), rec.define(loc("inner"))
    emit(CALL, outer)
    emit(CALL, inner)
    emit(RETURN, inner)
    emit(CALL, inner)
    rec.ring.set_state(EXITED, exit_code=3)
    trace = read_ring(str(tmp_path / "r.ring"))
    assert trace.identity == IDENTITY
    assert trace.config == {"include": ["x"]}
    assert (trace.state, trace.exit_code) == (EXITED, 3)
    assert [(e.word, e.loc.qualname, e.depth, e.seq, e.thread_seq) for e in trace.events] == [
        ("call", "Outer.run", 0, 0, 0), ("call", "inner", 1, 1, 1), ("ret", "inner", 1, 2, 2), ("call", "inner", 1, 3, 3)]
    assert trace.events[0].loc == loc("Outer.run")
    assert [f.qualname for f in trace.main_thread.open_frames] == ["Outer.run", "inner"]
    assert trace.main_thread.name == threading.current_thread().name
    assert all(e.wall_ns >= trace.start_wall_ns for e in trace.events)


def test_wrap_around_keeps_the_newest_capacity_events(tmp_path):
    rec = make_recorder(tmp_path / "r.ring", capacity=16)
    emit = rec.make_emit()
    code = rec.define(loc("f"))
    for _ in range(20):
        emit(CALL, code)
        emit(RETURN, code)
    trace = read_ring(str(tmp_path / "r.ring"))
    assert trace.total_events == 40
    assert [e.seq for e in trace.events] == list(range(24, 40))
    assert trace.dropped_events == 24
    assert trace.main_thread.open_frames == []


def test_torn_records_are_refused(tmp_path):
    path = tmp_path / "r.ring"
    rec = make_recorder(path, capacity=16)
    emit = rec.make_emit()
    code = rec.define(loc("f"))
    for _ in range(5):
        emit(CALL, code)
    data = bytearray(path.read_bytes())
    head = dict(zip(fmt.FIXED_FIELDS, fmt.FIXED.unpack_from(data, 0)))
    # Record 2 got its first half only (its trailing seq copy is stale), record 4 (the newest) too.
    for seq in (2, 4):
        struct.pack_into("<I", data, head["records_off"] + seq * fmt.RECORD_SIZE + 28, 999)
    path.write_bytes(bytes(data))
    trace = read_ring(str(path))
    assert [e.seq for e in trace.events] == [0, 1, 3]
    assert trace.total_events == 4  # the last complete event is #3


def test_full_string_table_and_thread_slots_degrade_with_warnings(tmp_path):
    rec = make_recorder(tmp_path / "r.ring", strings_bytes=100, max_threads=1)
    emit = rec.make_emit()
    ids = [rec.define(loc(f"function_with_a_long_name_{i}")) for i in range(3)]
    emit(CALL, ids[0])
    emit(CALL, ids[2])
    worker = threading.Thread(target=lambda: emit(CALL, ids[0]))
    worker.start()
    worker.join()
    trace = read_ring(str(tmp_path / "r.ring"))
    assert [e.loc.qualname for e in trace.events] == ["function_with_a_long_name_0", f"<unknown #{ids[2]}>",
                                                       "function_with_a_long_name_0"]
    assert trace.events[-1].thread == OVERFLOW_THREAD
    assert any("string table filled up" in w for w in trace.warnings)
    assert any("more threads than slots" in w for w in trace.warnings)


def test_stack_deeper_than_the_slots_is_marked_truncated(tmp_path):
    rec = make_recorder(tmp_path / "r.ring", max_depth=4)
    emit = rec.make_emit()
    codes = [rec.define(loc(f"f{i}")) for i in range(6)]
    for code in codes:
        emit(CALL, code)
    trace = read_ring(str(tmp_path / "r.ring"))
    assert [f.qualname for f in trace.main_thread.open_frames] == ["f0", "f1", "f2", "f3"]
    assert trace.main_thread.frames_truncated


def test_short_tail_of_a_wrapped_ring_equals_the_full_read(tmp_path):
    rec = make_recorder(tmp_path / "r.ring", capacity=256)
    emit = rec.make_emit()
    code = rec.define(loc("f"))
    for _ in range(500):
        emit(CALL, code)
        emit(RETURN, code)
    full = read_ring(str(tmp_path / "r.ring"))
    tail = read_ring(str(tmp_path / "r.ring"), tail=10)  # the fast path: seq words only, then 10 records
    assert [e.seq for e in tail.events] == list(range(990, 1000))
    assert tail.events == full.events[-10:]
    assert (tail.total_events, tail.dropped_events) == (1000, 990)


def test_gap_resets_the_stack_and_is_reported(tmp_path):
    """A thread whose hook was lost and put back: GAP (with the depth recorded before), then the open frames."""
    rec = make_recorder(tmp_path / "r.ring")
    emit = rec.make_emit()
    outer, inner, later = rec.define(loc("outer")), rec.define(loc("inner")), rec.define(loc("later"))
    emit(CALL, outer)
    emit(CALL, inner)  # inner returns while the hook is lost: no event
    rec.mark_gap(rec.states[threading.get_ident()])
    emit(OPEN, outer)
    emit(CALL, later)
    trace = read_ring(str(tmp_path / "r.ring"))
    assert [(e.word, e.loc.qualname, e.depth) for e in trace.events] == [
        ("call", "outer", 0), ("call", "inner", 1), ("gap", GAP_LOCATION.qualname, 2), ("open", "outer", 0),
        ("call", "later", 1)]
    assert [f.qualname for f in trace.main_thread.open_frames] == ["outer", "later"]
    assert trace.warnings == [f"{tmp_path / 'r.ring'}: {GAP_WARNING}"]


def test_gap_in_the_stream_file(tmp_path):
    meta = {"identity": IDENTITY.to_dict(), "config": {}, "t0_wall_ns": 1_700_000_000_000_000_000}
    rec = Recorder(None, StreamWriter(str(tmp_path / "t.txt"), meta), t0_mono_ns=0)
    emit = rec.make_emit()
    outer, inner = rec.define(loc("outer")), rec.define(loc("inner"))
    emit(CALL, outer)
    emit(CALL, inner)
    rec.mark_gap(rec.states[threading.get_ident()])
    emit(OPEN, outer)
    trace = read_stream(str(tmp_path / "t.txt"))
    assert [e.word for e in trace.events] == ["call", "call", "gap", "open"]
    assert trace.events[2].loc == GAP_LOCATION
    assert [f.qualname for f in trace.main_thread.open_frames] == ["outer"]


def test_a_ring_written_before_gaps_existed_reads_the_same():
    """fixtures/ring_v1_before_gap.ring was written by the writer before the GAP kind and FLAG_GAP were added."""
    trace = read_ring(str(FIXTURES / "ring_v1_before_gap.ring"))
    assert (trace.identity.rank, trace.identity.host, trace.state_word, trace.warnings) == (5, "oldnode", "stopped", [])
    assert (trace.total_events, trace.dropped_events) == (23, 7)
    assert [f.qualname for f in trace.main_thread.open_frames] == ["train", "step", "all_reduce"]
    assert [e.word for e in trace.events][-3:] == ["ret", "call", "ccall"]
    # Version 1 recorded no lines: each open frame shows its function's first line, marked as such.
    assert {f.line_source for f in trace.main_thread.frames} == {"def"}


def test_stack_entries_carry_the_line_each_caller_is_at(tmp_path):
    """A call writes the line of its nearest selected caller into the caller's entry (version 2)."""
    import sys
    rec = make_recorder(tmp_path / "r.ring")
    here = sys._getframe()
    emit = rec.make_emit({here.f_code: 1})  # this test function is the selected caller
    outer, inner = rec.define(loc("outer")), rec.define(loc("inner"))
    emit(CALL, outer)
    line = here.f_lineno + 1  # the next line: the call
    emit(CALL, inner, None, here)
    trace = read_ring(str(tmp_path / "r.ring"))
    assert trace.main_thread.open_lines == [line, 0]
    assert [(f.line, f.line_source) for f in trace.main_thread.frames] == [(line, "executing"), (10, "def")]
    emit(RETURN, inner)
    assert [(f.line, f.line_source) for f in read_ring(str(tmp_path / "r.ring")).main_thread.frames] == [
        (line, "last call")]


def test_damaged_string_table_is_one_warning_and_ids_stay_in_range(tmp_path):
    path = tmp_path / "r.ring"
    rec = make_recorder(path)
    emit = rec.make_emit()
    codes = [rec.define(loc(f"f{i}")) for i in range(3)]
    for code in codes:
        emit(CALL, code)
    data = bytearray(path.read_bytes())
    second = fmt.HEADER_SIZE + fmt.STRING_HEAD.size + (len(fmt.encode_location("pkg.mod", "f0", "/src/pkg/mod.py", 10,
                                                                                False)) + 3) // 4 * 4
    data[second + 8:second + 12] = b"\xff\xfe\xfd\xfc"  # the payload of f1 is no UTF-8 any more
    path.write_bytes(bytes(data))
    trace = read_ring(str(path))
    assert [e.loc.qualname for e in trace.events] == ["f0", "<unknown #2>", "<unknown #3>"]
    assert trace.warnings == [f"{path}: damaged ring, skipped what failed validation: the string table from byte "
                              f"{second - fmt.HEADER_SIZE} of {rec.ring._strings_end}"]


def test_strings_added_after_the_header_was_read_are_read_again(tmp_path, monkeypatch):
    """A live writer may define a code id between the reader's read of the header and of the records."""
    from tracing import ringreader
    path = tmp_path / "r.ring"
    rec = make_recorder(path)
    emit = rec.make_emit()
    first = rec.define(loc("first"))
    emit(CALL, first)
    stale_end = rec.ring._strings_end
    emit(CALL, rec.define(loc("defined_later")))
    real_read_at, reads = ringreader.read_at, []

    def read_at(fd, offset, size):  # the first full read still sees the old strings_end
        data = real_read_at(fd, offset, size)
        reads.append(size)
        if len(reads) == 2:
            data = bytearray(data)
            fmt.STRINGS_END.pack_into(data, fmt.STRINGS_END_AT, stale_end)
        return bytes(data)

    monkeypatch.setattr(ringreader, "read_at", read_at)
    trace = read_ring(str(path))
    assert len(reads) == 3 and trace.warnings == []
    assert [e.loc.qualname for e in trace.events] == ["first", "defined_later"]
