"""The call-ring file: a fixed-size MAP_SHARED mapping that survives SIGKILL and can be read while a rank hangs.

Layout (all integers little-endian; docs/tracing.md has the same table):

    offset 0        header, 4096 bytes: fixed fields, then mutable fields at 128, then identity JSON at 512
    strings_off     string table: entries (u32 code_id, u32 length, UTF-8 payload padded to 4 bytes)
    threads_off     max_threads slots: u64 ident, u32 native_id, u32 flags, 48-byte name, then the open-frame
                    stack, outermost first, ending at the first code id 0: entries (u32 code id, u32 line) in
                    version 2, bare u32 code ids in version 1
    records_off     capacity records of 32 bytes: event seq lives in slot seq % capacity

A record is `<QqIHBBII`: seq, t_ns since t0, code_id, depth, kind, thread slot, thread_seq, seq & 0xffffffff.
A reader accepts a record only if its two seq copies agree, it sits in slot seq % capacity and its kind is known;
the newest accepted record is the last complete event. Each write is one memcpy into the shared pages, so what a
killed process wrote before its last instruction is in the page cache, whatever happens to the process.

A torn write only ever leaves a record whose seq copies disagree. Anything else that does not fit is damage, and
the reader reports it (ringcheck.py): a record naming a code id beyond the string table, a thread slot that does
not exist or a time before t0 or after now; a thread slot with unknown flags, an undecodable name or a stack of
unknown code ids; a string entry out of order; a slot that holds neither a record nor zeros nor a torn write.

The line of a stack entry is where that frame is executing: when a frame is entered, the line its nearest
selected caller is at (the call that leads to it) is written into the caller's entry, in the same write as the new
entry. So every open frame but the innermost has its executing line; the innermost one has the line of its last
call of selected code (its line is 0 until it makes one). Version 2 added the lines; readers read both versions.

Kind 7 (GAP, added without a version change: older readers skip it) says that the thread's trace hook was lost
and put back: events are missing, the thread's depth starts again at 0 and OPEN records of the frames open at
that moment follow. FLAG_GAP in the header says that the file has one.

Order of writes, so that a reader never sees a reference before its target:
- a string entry is written, then `strings_end` moves past it, then the first event that uses the code id;
- a thread slot is filled, then its flags get the "used" bit;
- on a call the stack slot is written (the caller's line, the code id, its line 0, then a 0 terminator) before
  the record; on a return the slot's code id is zeroed before the record.
"""

from __future__ import annotations

import struct

MAGIC = b"HDTRACE\x01"
VERSION = 2  # 2: stack entries carry the executing line; 1: code ids only
READABLE_VERSIONS = (1, 2)
HEADER_SIZE = 4096
RECORD = struct.Struct("<QqIHBBII")
RECORD_SIZE = RECORD.size  # 32
assert RECORD_SIZE == 32

# Fixed header fields, written once at creation.
FIXED = struct.Struct("<8sIIII QQ QIII I Q qq I")
FIXED_FIELDS = (
    "magic", "version", "header_size", "record_size", "capacity",
    "strings_off", "strings_size",
    "threads_off", "max_threads", "max_depth", "thread_slot_size",
    "reserved",
    "records_off",
    "t0_wall_ns", "t0_mono_ns",
    "meta_len",
)
assert FIXED.size <= 128

# Mutable header fields, each updated by one aligned write.
STRINGS_END = struct.Struct("<Q")
STRINGS_END_AT = 128
STATE = struct.Struct("<IIqi")  # state, flags, state_wall_ns, exit_code
STATE_AT = 136
NO_EXIT_CODE = -(2**31)
META_AT = 512
META_MAX = HEADER_SIZE - META_AT

FLAG_STRINGS_FULL = 1
FLAG_THREADS_FULL = 2
FLAG_GAP = 4  # some thread's trace hook was lost and put back (see records.GAP)

THREAD_HEAD = struct.Struct("<QII48s")  # ident, native_id, flags, name
THREAD_USED = 1
THREAD_MAIN = 2
THREAD_FLAGS_AT = 12  # offset of flags inside a slot
U32 = struct.Struct("<I")
STACK_ENTRY = struct.Struct("<II")  # code id, line (version 2)
ENTRY_SIZE = STACK_ENTRY.size
PUSH_FIRST = struct.Struct("<III")  # at depth 0: code id, its line 0, the 0 terminator after it
PUSH = struct.Struct("<IIII")  # deeper: the caller's line (ending its entry), code id, its line 0, the terminator

STRING_HEAD = struct.Struct("<II")  # code_id, payload length
FIELD_SEP = "\t"
MIN_STRING_ENTRY = STRING_HEAD.size + 8  # the shortest payload, "\t\t\t0\tc", padded to 4 bytes


def thread_slot_size(max_depth: int, version: int = VERSION) -> int:
    entry = U32.size if version == 1 else ENTRY_SIZE
    size = THREAD_HEAD.size + entry * (max_depth + 1)
    return (size + 7) // 8 * 8


def encode_location(module: str, qualname: str, filename: str, lineno: int, is_c: bool) -> bytes:
    fields = (module, qualname, filename, str(lineno), "c" if is_c else "py")
    return FIELD_SEP.join(f.replace(FIELD_SEP, " ") for f in fields).encode("utf-8", "replace")


def decode_location(payload: bytes) -> tuple[str, str, str, int, bool]:
    """Raises ValueError unless payload is exactly what encode_location writes (valid UTF-8, five fields)."""
    module, qualname, filename, lineno, kind = payload.decode("utf-8").split(FIELD_SEP)
    if kind not in ("c", "py") or not lineno.isdigit() or not qualname:
        raise ValueError(f"not a code location: {payload[:40]!r}")
    return module, qualname, filename, int(lineno), kind == "c"
