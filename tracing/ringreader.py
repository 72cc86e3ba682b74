"""Reads a flight-recorder file (format: ringformat.py) into a RankTrace, from a dead process or a live one.

The file is read with plain read(2): a live writer's pages are the same page-cache pages, so the reader sees
every completed write. A record torn by a concurrent write or by the kill fails the seq check and is skipped.
"""

from __future__ import annotations

import json
import sys

from tracing import ringformat as fmt
from tracing.identity import RankIdentity
from tracing.records import KIND_WORDS, CodeLocation, Event, RankTrace, ThreadTrace
from tracing.recorder import OVERFLOW_THREAD


class RingFormatError(ValueError):
    pass


def read_ring(path: str, tail: int | None = None) -> RankTrace:
    """tail: decode only the newest `tail` events (open frames come from the stack slots and need no events)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise RingFormatError(f"{path}: empty ring file (the process died before tracing started?)")
    if len(data) < fmt.HEADER_SIZE or data[:8] != fmt.MAGIC:
        raise RingFormatError(f"{path}: not a hangdoctor ring file (bad magic)")
    head = dict(zip(fmt.FIXED_FIELDS, fmt.FIXED.unpack_from(data, 0)))
    if head["version"] != fmt.VERSION or head["record_size"] != fmt.RECORD_SIZE:
        raise RingFormatError(f"{path}: ring format version {head['version']} (record size {head['record_size']}) "
                              f"is not the version {fmt.VERSION} this reader knows")
    capacity = head["capacity"]
    expected = head["records_off"] + capacity * fmt.RECORD_SIZE
    if capacity < 1 or len(data) < expected:
        raise RingFormatError(f"{path}: truncated ring file: {len(data)} bytes, its header says {expected}")
    try:
        meta = json.loads(data[fmt.META_AT:fmt.META_AT + head["meta_len"]])
        identity = RankIdentity.from_dict(meta["identity"])
    except (ValueError, KeyError, TypeError) as e:
        raise RingFormatError(f"{path}: unreadable identity in the header ({e})") from None
    (strings_end,) = fmt.STRINGS_END.unpack_from(data, fmt.STRINGS_END_AT)
    state, flags, state_wall_ns, exit_code = fmt.STATE.unpack_from(data, fmt.STATE_AT)
    t0 = head["t0_wall_ns"]
    trace = RankTrace(
        identity=identity, path=path, source="ring", state=state, start_wall_ns=t0,
        state_wall_ns=state_wall_ns or None, exit_code=None if exit_code == fmt.NO_EXIT_CODE else exit_code,
        config=meta.get("config", {}),
    )
    locations = _read_strings(data, head["strings_off"], min(strings_end, head["strings_size"]), trace)
    if flags & fmt.FLAG_STRINGS_FULL:
        trace.warnings.append(f"{path}: the string table filled up; later functions show as <unknown #id>")
    if flags & fmt.FLAG_THREADS_FULL:
        trace.warnings.append(f"{path}: more threads than slots; the extra ones are merged as thread {OVERFLOW_THREAD}")

    def location(code_id: int) -> CodeLocation:
        loc = locations.get(code_id)
        if loc is None:
            loc = locations[code_id] = CodeLocation("", f"<unknown #{code_id}>", "", 0)
        return loc

    threads = _read_threads(data, head, location)
    records = None
    if tail is not None and tail < capacity // 4:
        records, newest = _newest_records(data, head["records_off"], capacity, tail)
    if records is None:
        records = _valid_records(data, head["records_off"], capacity)
        newest = records[-1][0] if records else -1
        if tail is not None:
            records = records[-tail:] if tail > 0 else []
    trace.total_events = newest + 1
    trace.dropped_events = trace.total_events - len(records)
    by_index = {t.index: t for t in threads}
    for seq, t_ns, code_id, depth, kind, thread, tseq in records:
        owner = by_index.get(thread)
        if owner is None:
            name = "(threads beyond the ring's slots)" if thread == OVERFLOW_THREAD else f"thread {thread}"
            owner = by_index[thread] = ThreadTrace(index=thread, name=name)
            threads.append(owner)
        owner.events.append(Event(seq, thread, tseq, t0 + t_ns, kind, depth, location(code_id)))
    trace.threads = sorted(threads, key=lambda t: t.index)
    return trace


def _read_strings(data: bytes, start: int, used: int, trace: RankTrace) -> dict[int, CodeLocation]:
    locations: dict[int, CodeLocation] = {}
    at, end = start, start + used
    while at + fmt.STRING_HEAD.size <= end:
        code_id, length = fmt.STRING_HEAD.unpack_from(data, at)
        payload_at = at + fmt.STRING_HEAD.size
        if length == 0 or payload_at + length > end:
            trace.warnings.append(f"{trace.path}: string table damaged at byte {at - start}; later names unknown")
            break
        try:
            module, qualname, filename, lineno, is_c = fmt.decode_location(data[payload_at:payload_at + length])
        except ValueError:
            trace.warnings.append(f"{trace.path}: unreadable string table entry for code id {code_id}")
        else:
            locations[code_id] = CodeLocation(module, qualname, filename, lineno, is_c)
        at = payload_at + (length + 3) // 4 * 4
    return locations


def _read_threads(data: bytes, head: dict, location) -> list[ThreadTrace]:
    threads = []
    slot_size, depth_max = head["thread_slot_size"], head["max_depth"]
    for index in range(head["max_threads"]):
        at = head["threads_off"] + index * slot_size
        ident, native_id, flags, raw_name = fmt.THREAD_HEAD.unpack_from(data, at)
        if not flags & fmt.THREAD_USED:
            break  # slots are claimed in order
        stack_at = at + fmt.THREAD_HEAD.size
        frames = []
        for (code_id,) in fmt.U32.iter_unpack(data[stack_at:stack_at + 4 * depth_max]):
            if code_id == 0:
                break
            frames.append(location(code_id))
        threads.append(ThreadTrace(
            index=index, name=raw_name.rstrip(b"\0").decode("utf-8", "replace"), ident=ident, native_id=native_id,
            is_main=bool(flags & fmt.THREAD_MAIN), open_frames=frames, frames_truncated=len(frames) == depth_max,
        ))
    return threads


def _valid_records(data: bytes, start: int, capacity: int) -> list[tuple]:
    """Records whose two seq copies agree and that sit in their own slot, oldest first, without a torn tail."""
    view = memoryview(data)[start:start + capacity * fmt.RECORD_SIZE]
    kinds = KIND_WORDS
    records = [
        (seq, t_ns, code_id, depth, kind, thread, tseq)
        for slot, (seq, t_ns, code_id, depth, kind, thread, tseq, check) in enumerate(fmt.RECORD.iter_unpack(view))
        if kind in kinds and check == seq & 0xFFFFFFFF and seq % capacity == slot
    ]
    records.sort()
    if records:
        newest = records[-1][0]
        records = [r for r in records if r[0] > newest - capacity]
    return records


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
