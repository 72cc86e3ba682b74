"""Reads a call-ring file (format: ringformat.py) into a RankTrace, from a dead process or a live one.

Only a regular file is read (regularfile.py), with pread(2) of the sizes its header gives: a live writer's pages
are the same page-cache pages, so the reader sees every completed write. A record torn by a concurrent write or
by the kill fails the seq check and is skipped. What is decoded is validated (ringcheck.py): a damaged file gets
one warning that names it and says what was skipped, or an error when nothing valid remains.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tracing import ringformat as fmt
from tracing.identity import RankIdentity
from tracing.records import GAP, GAP_LOCATION, GAP_WARNING, KIND_WORDS, CodeLocation, Event, RankTrace, ThreadTrace
from tracing.recorder import OVERFLOW_THREAD
from tracing.regularfile import open_regular, read_at
from tracing.ringcheck import (
    DAY_NS, RecordCheck, StringTable, damage_summary, foreign_slots, layout_problem, read_strings, read_thread_slots,
)

class RingFormatError(ValueError):
    pass


def read_ring(path: str, tail: int | None = None) -> RankTrace:
    """tail: decode only the newest `tail` events (open frames come from the stack slots and need no events).
    Raises RingFormatError (or regularfile.NotRegularFile, OSError) with a one-line message."""
    fd = open_regular(path)
    try:
        return _read(fd, path, tail)
    finally:
        os.close(fd)


def _read(fd: int, path: str, tail: int | None) -> RankTrace:
    size = os.fstat(fd).st_size
    if size == 0:
        raise RingFormatError(f"{path}: empty ring file (the process died before tracing started?)")
    data = read_at(fd, 0, fmt.HEADER_SIZE)
    if len(data) < fmt.HEADER_SIZE or data[:8] != fmt.MAGIC:
        raise RingFormatError(f"{path}: not a hangdoctor ring file (bad magic)")
    head = dict(zip(fmt.FIXED_FIELDS, fmt.FIXED.unpack_from(data, 0)))
    if head["version"] not in fmt.READABLE_VERSIONS or head["record_size"] != fmt.RECORD_SIZE:
        known = " or ".join(str(v) for v in fmt.READABLE_VERSIONS)
        raise RingFormatError(f"{path}: ring format version {head['version']} (record size {head['record_size']}) "
                              f"is not a version this reader knows ({known})")
    problem = layout_problem(head)
    if problem:
        raise RingFormatError(f"{path}: damaged ring header ({problem})")
    expected = head["records_off"] + head["capacity"] * fmt.RECORD_SIZE
    if size >= expected:
        data = read_at(fd, 0, expected)
        size = len(data)  # less if it shrank meanwhile
    if size < expected:
        raise RingFormatError(f"{path}: truncated ring file: {size} bytes, its header says {expected}")
    try:
        meta = json.loads(data[fmt.META_AT:fmt.META_AT + head["meta_len"]])
        identity = RankIdentity.from_dict(meta["identity"])
    except (ValueError, KeyError, TypeError) as e:
        raise RingFormatError(f"{path}: unreadable identity in the header ({e})") from None
    state, flags, state_wall_ns, exit_code = fmt.STATE.unpack_from(data, fmt.STATE_AT)
    t0 = head["t0_wall_ns"]
    trace = RankTrace(
        identity=identity, path=path, source="ring", state=state, start_wall_ns=t0,
        state_wall_ns=state_wall_ns or None, exit_code=None if exit_code == fmt.NO_EXIT_CODE else exit_code,
        config=meta.get("config", {}) if isinstance(meta.get("config"), dict) else {},
    )
    strings, used = _strings(data, head)
    slots, bad_slots = read_thread_slots(data, head)
    records, newest, foreign = _records(data, head, tail)
    referenced = max([max(s.stack) for s in slots if s.stack] + [r[2] for r in records], default=0)
    if referenced > strings.bound or strings.damaged_at is not None:
        # A live writer may have added strings after the header was read: read the table once more.
        fresh = read_at(fd, 0, head["threads_off"])
        if len(fresh) == head["threads_off"]:
            strings, used = _strings(fresh, head)
            flags |= fmt.STATE.unpack_from(fresh, fmt.STATE_AT)[1]
    good_slots = [s for s in slots if not s.stack or max(s.stack) <= strings.bound]
    bad_slots += len(slots) - len(good_slots)
    check = RecordCheck(strings.bound, head["max_threads"], max(time.time_ns(), state_wall_ns) - t0 + DAY_NS)
    records = [r for r in records if check.ok(r)]
    damage = damage_summary(strings, used, bad_slots, head["max_threads"], check.bad + foreign)
    if damage and not good_slots and not records:
        raise RingFormatError(f"{path}: damaged ring, nothing in it is valid (failed validation: {damage})")
    if damage:
        trace.warnings.append(f"{path}: damaged ring, skipped what failed validation: {damage}")
    if flags & fmt.FLAG_STRINGS_FULL:
        trace.warnings.append(f"{path}: the string table filled up; later functions show as <unknown #id>")
    if flags & fmt.FLAG_THREADS_FULL:
        trace.warnings.append(f"{path}: more threads than slots; the extra ones are merged as thread {OVERFLOW_THREAD}")
    if flags & fmt.FLAG_GAP:
        trace.warnings.append(f"{path}: {GAP_WARNING}")
    _fill(trace, strings.locations, good_slots, records, head["max_depth"])
    trace.total_events = newest + 1
    trace.dropped_events = trace.total_events - len(records)
    trace.in_file = min(trace.total_events, head["capacity"])
    return trace


def _strings(data: bytes, head: dict) -> tuple[StringTable, int]:
    (strings_end,) = fmt.STRINGS_END.unpack_from(data, fmt.STRINGS_END_AT)
    flags = fmt.STATE.unpack_from(data, fmt.STATE_AT)[1]
    table = read_strings(data, head["strings_off"], head["strings_size"], strings_end,
                         full=bool(flags & fmt.FLAG_STRINGS_FULL))
    return table, min(strings_end, head["strings_size"])


def _fill(trace: RankTrace, locations: dict[int, CodeLocation], slots, records: list[tuple], max_depth: int) -> None:
    def location(code_id: int) -> CodeLocation:
        loc = locations.get(code_id)
        if loc is None:
            loc = locations[code_id] = CodeLocation("", f"<unknown #{code_id}>", "", 0)
        return loc

    threads = [ThreadTrace(index=s.index, name=s.name, ident=s.ident, native_id=s.native_id,
                           is_main=bool(s.flags & fmt.THREAD_MAIN), open_frames=[location(c) for c in s.stack],
                           open_lines=list(s.lines), frames_truncated=len(s.stack) == max_depth) for s in slots]
    by_index = {t.index: t for t in threads}
    t0 = trace.start_wall_ns
    for seq, t_ns, code_id, depth, kind, thread, tseq in records:
        owner = by_index.get(thread)
        if owner is None:  # a slot claimed after it was read, or one that failed validation
            name = "(threads beyond the ring's slots)" if thread == OVERFLOW_THREAD else f"thread {thread}"
            owner = by_index[thread] = ThreadTrace(index=thread, name=name)
            threads.append(owner)
        loc = GAP_LOCATION if kind == GAP else location(code_id)
        owner.events.append(Event(seq, thread, tseq, t0 + t_ns, kind, depth, loc))
    trace.threads = sorted(threads, key=lambda t: t.index)


def _records(data: bytes, head: dict, tail: int | None) -> tuple[list[tuple], int, int]:
    """(accepted records oldest first, newest seq, slots that hold neither a record nor a torn write)."""
    start, capacity = head["records_off"], head["capacity"]
    if tail is not None and tail < capacity // 4:
        records, newest = _newest_records(data, start, capacity, tail)
        if records is not None:
            return records, newest, 0
    records, failed = _valid_records(data, start, capacity)
    newest = records[-1][0] if records else -1
    foreign = foreign_slots(failed, capacity, max(newest, 0))
    if tail is not None:
        records = records[-tail:] if tail > 0 else []
    return records, newest, foreign


def _valid_records(data: bytes, start: int, capacity: int) -> tuple[list[tuple], list[tuple[int, int, int]]]:
    """Records whose two seq copies agree and that sit in their own slot, oldest first, without a torn tail; and
    (slot, seq, check) of the other slots that are not all zeros."""
    view = memoryview(data)[start:start + capacity * fmt.RECORD_SIZE]
    kinds = KIND_WORDS
    records, failed = [], []
    for slot, (seq, t_ns, code_id, depth, kind, thread, tseq, check) in enumerate(fmt.RECORD.iter_unpack(view)):
        if kind in kinds and check == seq & 0xFFFFFFFF and seq % capacity == slot:
            records.append((seq, t_ns, code_id, depth, kind, thread, tseq))
        elif seq or t_ns or code_id or depth or kind or thread or tseq or check:
            failed.append((slot, seq, check))
    records.sort()
    if records:
        newest = records[-1][0]
        records = [r for r in records if r[0] > newest - capacity]
    return records, failed


def _newest_records(data: bytes, start: int, capacity: int, tail: int) -> tuple[list[tuple] | None, int]:
    """Fast path for a short tail of a big ring: find the newest seq from the seq words alone, then decode only
    the slots of the `tail` events before it. (None, -1) when it cannot decide; the full scan decides then."""
    if sys.byteorder != "little":
        return None, -1
    words = memoryview(data)[start:start + capacity * fmt.RECORD_SIZE].cast("Q")
    seqs = words[0::4].tolist()
    slot = max(range(capacity), key=seqs.__getitem__)
    newest = seqs[slot]
    if slot != newest % capacity or not _whole(data, start, slot, newest):
        return None, -1
    records = []
    for seq in range(max(0, newest - tail + 1), newest + 1):
        fields = fmt.RECORD.unpack_from(data, start + (seq % capacity) * fmt.RECORD_SIZE)
        if fields[0] == seq and fields[7] == seq & 0xFFFFFFFF and fields[4] in KIND_WORDS:
            records.append(fields[:7])
    return records, newest


def _whole(data: bytes, start: int, slot: int, seq: int) -> bool:
    fields = fmt.RECORD.unpack_from(data, start + slot * fmt.RECORD_SIZE)
    return fields[7] == seq & 0xFFFFFFFF and fields[4] in KIND_WORDS
