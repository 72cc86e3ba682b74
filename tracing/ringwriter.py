"""Creates a call-ring file and writes its header, string table and thread slots (format: ringformat.py).

Events themselves are written by the recorder's hot path straight into `buf`, which is the shared mapping.
"""

from __future__ import annotations

import json
import mmap
import os
import time

from tracing import ringformat as fmt
from tracing.records import RUNNING


class RingWriter:
    def __init__(self, path: str, capacity: int, meta: dict, *, t0_mono_ns: int, t0_wall_ns: int,
                 strings_bytes: int = 1 << 20, max_threads: int = 64, max_depth: int = 256) -> None:
        if capacity < 16:
            raise ValueError(f"ring capacity {capacity} is too small; give at least 16 events")
        self.path = path
        self.capacity = capacity
        self.max_threads = max_threads
        self.max_depth = max_depth
        self.slot_size = fmt.thread_slot_size(max_depth)
        self.strings_off = fmt.HEADER_SIZE
        self.strings_size = strings_bytes
        self.threads_off = self.strings_off + strings_bytes
        self.records_off = self.threads_off + max_threads * self.slot_size
        self.size = self.records_off + capacity * fmt.RECORD_SIZE
        meta_bytes = json.dumps(meta, sort_keys=True).encode()
        if len(meta_bytes) > fmt.META_MAX:
            meta = dict(meta, identity=dict(meta.get("identity", {}), argv=["<argv too long>"]))
            meta_bytes = json.dumps(meta, sort_keys=True).encode()[: fmt.META_MAX]
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, self.size)  # sparse: pages no event touched take no disk space
            self.buf = mmap.mmap(fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._strings_end = 0
        self._threads_used = 0
        self._flags = 0
        self.buf[fmt.META_AT:fmt.META_AT + len(meta_bytes)] = meta_bytes
        fmt.FIXED.pack_into(
            self.buf, 0, fmt.MAGIC, fmt.VERSION, fmt.HEADER_SIZE, fmt.RECORD_SIZE, capacity,
            self.strings_off, self.strings_size, self.threads_off, max_threads, max_depth, self.slot_size, 0,
            self.records_off, t0_wall_ns, t0_mono_ns, len(meta_bytes),
        )
        self.set_state(RUNNING)

    def define(self, code_id: int, payload: bytes) -> None:
        """Append a code location to the string table (see ringformat.encode_location)."""
        padded = (len(payload) + 3) // 4 * 4
        need = fmt.STRING_HEAD.size + padded
        if self._strings_end + need > self.strings_size:
            self._flags |= fmt.FLAG_STRINGS_FULL
            self._write_state_flags()
            return
        at = self.strings_off + self._strings_end
        # Padding included: a define that failed half-way (RecursionError) and is retried leaves no stale bytes.
        self.buf[at + fmt.STRING_HEAD.size:at + need] = payload + bytes(padded - len(payload))
        fmt.STRING_HEAD.pack_into(self.buf, at, code_id, len(payload))
        end = self._strings_end + need
        fmt.STRINGS_END.pack_into(self.buf, fmt.STRINGS_END_AT, end)
        self._strings_end = end

    def add_thread(self, ident: int, native_id: int, name: str, is_main: bool) -> tuple[int, int] | None:
        """Claim a thread slot; returns (slot index, offset of its stack) or None when all slots are taken."""
        if self._threads_used >= self.max_threads:
            self._flags |= fmt.FLAG_THREADS_FULL
            self._write_state_flags()
            return None
        index = self._threads_used
        self._threads_used += 1
        at = self.threads_off + index * self.slot_size
        flags = fmt.THREAD_USED | (fmt.THREAD_MAIN if is_main else 0)
        fmt.THREAD_HEAD.pack_into(self.buf, at, ident & (2**64 - 1), native_id & 0xFFFFFFFF, 0,
                                  name.encode("utf-8", "replace")[:48])
        fmt.U32.pack_into(self.buf, at + fmt.THREAD_FLAGS_AT, flags)
        return index, at + fmt.THREAD_HEAD.size

    def note_gap(self) -> None:
        """Some thread's hook was lost and put back: readers warn that events are missing (see records.GAP)."""
        if not self._flags & fmt.FLAG_GAP:
            self._flags |= fmt.FLAG_GAP
            self._write_state_flags()

    def set_state(self, state: int, exit_code: int | None = None) -> None:
        self._state = state
        self._exit_code = fmt.NO_EXIT_CODE if exit_code is None else int(exit_code)
        self._state_time = time.time_ns()
        self._write_state_flags()

    def _write_state_flags(self) -> None:
        if not self.buf.closed:
            fmt.STATE.pack_into(self.buf, fmt.STATE_AT, self._state, self._flags, self._state_time, self._exit_code)

    def close(self) -> None:
        if not self.buf.closed:
            try:
                self.buf.flush()
                self.buf.close()
            except (BufferError, ValueError):
                pass  # another thread is inside a write; the OS unmaps it at exit

    def forget(self) -> None:
        """In a forked child: drop the mapping without writing, since the parent's pages are shared."""
        try:
            self.buf.close()
        except (BufferError, ValueError):
            pass
