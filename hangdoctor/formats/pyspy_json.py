"""py-spy's `dump --json` output (a list of threads, each with frames innermost first) -> ThreadStacks."""

from __future__ import annotations

from hangdoctor.formats import frames as interned
from hangdoctor.model import ThreadStack


def parse_threads(data: list) -> tuple[ThreadStack, ...]:
    """Accepts py-spy 0.3/0.4 JSON. Raises ValueError on anything that is not a list of thread objects."""
    if not isinstance(data, list):
        raise ValueError("py-spy JSON must be a list of threads")
    threads = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("frames"), list):
            raise ValueError("py-spy JSON thread without a frames list")
        frames = []
        for f in item["frames"]:
            line = f.get("line") or 0
            native = bool(f.get("module")) or (line == 0 and interned.looks_native(f.get("short_filename") or ""))
            frames.append(interned.frame(str(f.get("name", "?")), str(f.get("short_filename") or f.get("filename") or "?"),
                                         int(line), native))
        tid = item.get("os_thread_id") or item.get("thread_id") or 0
        threads.append(ThreadStack(
            thread_id=int(tid), name=item.get("thread_name") or "", frames=interned.stack(frames),
            active=item.get("active"), owns_gil=item.get("owns_gil"),
        ))
    return tuple(threads)


def pid_of(data: list) -> int | None:
    for item in data:
        if isinstance(item, dict) and item.get("pid"):
            return int(item["pid"])
    return None
