"""Validation of what a ring file holds (format: ringformat.py), so that a damaged file is reported as damaged.

A torn write (a process killed in the middle of one, or a reader racing a live writer) leaves a record whose
two seq copies disagree, or a string or thread slot that the header does not count yet: the reader skips those
silently, as before. Everything else that does not fit the format is damage, counted here for one warning:
- the header's regions must add up as the writer lays them out;
- string entries come in code-id order (1, 2, 3... until the table filled up), each a UTF-8 location;
- a used thread slot has known flags, a non-zero ident, a UTF-8 name and a stack of code ids the string table
  can hold;
- an accepted record names a code id the table can hold (0 for a GAP), an existing thread slot, and a time
  between t0 and now (plus a day of clock skew);
- a record slot holds zeros, a record, or a torn write whose seq copies point at this slot.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from tracing import ringformat as fmt
from tracing.records import GAP, CodeLocation

ANY_ID = 0xFFFFFFFF
DAY_NS = 86_400 * 10**9
MAX_THREADS = 254  # slot 255 is the overflow thread


def layout_problem(head: dict) -> str | None:
    """What is wrong with the fixed header fields, or None."""
    if head["header_size"] != fmt.HEADER_SIZE or head["strings_off"] != fmt.HEADER_SIZE:
        return f"header size {head['header_size']}, strings at {head['strings_off']}"
    if not 1 <= head["max_threads"] <= MAX_THREADS or head["capacity"] < 1:
        return f"{head['max_threads']} thread slots, {head['capacity']} records"
    if head["thread_slot_size"] != fmt.thread_slot_size(head["max_depth"], head["version"]):
        return f"thread slot size {head['thread_slot_size']} for depth {head['max_depth']}"
    if (head["threads_off"] != head["strings_off"] + head["strings_size"]
            or head["records_off"] != head["threads_off"] + head["max_threads"] * head["thread_slot_size"]):
        return "its region offsets do not add up"
    if head["meta_len"] > fmt.META_MAX or head["t0_wall_ns"] <= 0:
        return f"metadata length {head['meta_len']}, start time {head['t0_wall_ns']}"
    return None


@dataclass
class StringTable:
    locations: dict[int, CodeLocation]
    last_id: int  # the highest code id read
    bound: int  # the highest code id the file can refer to (ANY_ID once the table filled up)
    damaged_at: int | None = None  # byte offset in the table of the first bad entry


def read_strings(data: bytes, start: int, size: int, used: int, full: bool) -> StringTable:
    locations: dict[int, CodeLocation] = {}
    at, end = start, start + min(used, size)
    last_id, damaged_at = 0, None if used <= size else size
    while at < end:
        problem = at + fmt.STRING_HEAD.size > end
        if not problem:
            code_id, length = fmt.STRING_HEAD.unpack_from(data, at)
            payload_at = at + fmt.STRING_HEAD.size
            padded_end = payload_at + (length + 3) // 4 * 4
            problem = (length == 0 or padded_end > end or code_id <= last_id or (not full and code_id != last_id + 1)
                       or any(data[payload_at + length:padded_end]))
        if not problem:
            try:
                module, qualname, filename, lineno, is_c = fmt.decode_location(data[payload_at:payload_at + length])
            except ValueError:
                problem = True
        if problem:
            damaged_at = at - start
            break
        locations[code_id] = CodeLocation(module, qualname, filename, lineno, is_c)
        last_id, at = code_id, padded_end
    bound = last_id
    if full:
        bound = ANY_ID
    elif damaged_at is not None:  # ids after the damage were contiguous: as many as the rest could have held
        bound = last_id + max(0, min(used, size) - damaged_at) // fmt.MIN_STRING_ENTRY
    return StringTable(locations, last_id, bound, damaged_at)


def thread_name(raw: bytes) -> str | None:
    """The slot's name, or None when it is not UTF-8 as the writer encodes it. Control characters (a thread may
    be named anything) are shown as '?', so that a name cannot garble the terminal."""
    name = raw.rstrip(b"\0")
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError as e:  # the writer cuts names at 48 bytes, maybe inside a character: only there
        if e.reason != "unexpected end of data" or e.end != len(name):
            return None
        text = name[:e.start].decode("utf-8")
    return "".join("?" if unicodedata.category(c) == "Cc" else c for c in text)


@dataclass
class ThreadSlot:
    index: int
    ident: int
    native_id: int
    flags: int
    name: str
    stack: list[int]  # code ids, outermost first
    lines: list[int]  # the line each of them is at (0: not recorded; always 0 in a version 1 ring)


def read_thread_slots(data: bytes, head: dict) -> tuple[list[ThreadSlot], int]:
    """(used slots that look right, number of slots that are damaged); slots are claimed in order."""
    slots, bad = [], 0
    size, depth_max = head["thread_slot_size"], head["max_depth"]
    for index in range(head["max_threads"]):
        at = head["threads_off"] + index * size
        ident, native_id, flags, raw_name = fmt.THREAD_HEAD.unpack_from(data, at)
        if flags == 0:
            break  # the first unused slot
        name = thread_name(raw_name)
        if not flags & fmt.THREAD_USED or flags & ~(fmt.THREAD_USED | fmt.THREAD_MAIN) or not ident or name is None:
            bad += 1
            continue
        stack_at = at + fmt.THREAD_HEAD.size
        stack: list[int] = []
        lines: list[int] = []
        if head["version"] == 1:
            entries = ((code_id, 0) for (code_id,) in fmt.U32.iter_unpack(data[stack_at:stack_at + 4 * depth_max]))
        else:
            entries = fmt.STACK_ENTRY.iter_unpack(data[stack_at:stack_at + fmt.ENTRY_SIZE * depth_max])
        for code_id, line in entries:
            if code_id == 0:
                break
            stack.append(code_id)
            lines.append(line)
        slots.append(ThreadSlot(index, ident, native_id, flags, name, stack, lines))
    return slots, bad


@dataclass
class RecordCheck:
    """Checks accepted records against what the rest of the file says."""

    bound: int  # highest code id
    max_threads: int
    t_max: int  # latest plausible t_ns
    bad: int = 0

    def ok(self, record: tuple) -> bool:
        _, t_ns, code_id, _, kind, thread, _ = record
        if kind == GAP:
            good = code_id == 0
        else:
            good = code_id <= self.bound
        good = good and (thread < self.max_threads or thread == 255) and 0 <= t_ns <= self.t_max
        if not good:
            self.bad += 1
        return good


def foreign_slots(failed: list[tuple[int, int, int]], capacity: int, newest: int) -> int:
    """Of the non-zero record slots that were not accepted, (slot, seq, check) each, those that are not torn
    writes: a torn write has at least one seq copy of an event that belongs in this slot."""
    high = newest >> 32 << 32
    count = 0
    for slot, seq, check in failed:
        if seq % capacity == slot:
            continue
        if any(s >= 0 and s % capacity == slot for s in (high | check, (high | check) - (1 << 32))):
            continue
        count += 1
    return count


def damage_summary(strings: StringTable, used: int, bad_slots: int, max_threads: int, bad_records: int) -> str:
    parts = []
    if strings.damaged_at is not None:
        parts.append(f"the string table from byte {strings.damaged_at} of {used}")
    if bad_slots:
        parts.append(f"{bad_slots} of {max_threads} thread slot(s)")
    if bad_records:
        parts.append(f"{bad_records} record(s)")
    return ", ".join(parts)
