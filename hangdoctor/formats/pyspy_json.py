"""py-spy's `dump --json` output (a list of threads, each with frames innermost first) -> ThreadStacks.

The collector's factored form (collector/compact.py) is read by formats/nodefile.py with the same frames.
"""

from __future__ import annotations

from hangdoctor.formats import frames as interned
from hangdoctor.model import Frame, ThreadStack

_by_json: dict[tuple, Frame] = {}  # (name, short_filename, line, module) -> interned frame


def frame_from_json(f: dict) -> Frame:
    key = (f.get("name"), f.get("short_filename") or f.get("filename"), f.get("line") or 0, f.get("module"))
    found = _by_json.get(key)
    if found is None:
        name, file, line, module = key
        file = str(file or "?")
        native = bool(module) or (line == 0 and interned.looks_native(file))
        found = _by_json[key] = interned.frame(str(name or "?"), file, int(line), native)
    return found


def parse_threads(data: list) -> tuple[ThreadStack, ...]:
    """Accepts py-spy 0.3/0.4 JSON. Raises ValueError on anything else."""
    if not isinstance(data, list):
        raise ValueError("py-spy JSON must be a list of threads")
    threads = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("frames"), list):
            raise ValueError("py-spy JSON thread without a frames list")
        try:
            frames = [frame_from_json(f) for f in item["frames"]]
        except (IndexError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"bad frame in py-spy JSON: {exc}") from None
        tid = item.get("os_thread_id") or item.get("thread_id") or 0
        threads.append(ThreadStack(
            thread_id=int(tid), name=item.get("thread_name") or "", frames=interned.stack(frames),
            active=item.get("active"), owns_gil=item.get("owns_gil"), locals=locals_of(item["frames"]),
        ))
    return tuple(threads)


def locals_of(frames: list) -> tuple | None:
    """py-spy --locals: per frame {name: repr} (arguments and locals), or None when no frame has any."""
    if not any(isinstance(f, dict) and f.get("locals") for f in frames):
        return None
    out = []
    for f in frames:
        items = f.get("locals") if isinstance(f, dict) else None
        out.append({str(v.get("name")): str(v.get("repr"))[:200] for v in items if isinstance(v, dict)}
                   if isinstance(items, list) and items else None)
    return tuple(out)


def pid_of(data: list) -> int | None:
    for item in data:
        if isinstance(item, dict) and item.get("pid"):
            return int(item["pid"])
    return None
