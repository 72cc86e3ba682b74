"""The source text of the line each thread stands on, read on the node where the files are. Stdlib only.

py-spy names a Python frame and its line, but not what the line calls: a rank blocked in `handle.wait()`,
`loss.item()` or `time.sleep(5)` (C functions, no Python frame of their own) shows only its caller's line.
That line's text tells the wait apart; the analysis reads it through the wait table's source rules.
"""

from __future__ import annotations

import linecache


def innermost_lines(infos: list) -> dict:
    """{"short_file:line": text} for the innermost Python frame of every thread of every sample (py-spy JSON
    only: its frames carry the absolute file name). Files that cannot be read are left out."""
    lines: dict = {}
    for info in infos:
        for sample in info.get("samples", []):
            for thread in sample.get("pyspy_json") or []:
                frames = thread.get("frames") if isinstance(thread, dict) else None
                frame = next((f for f in frames or [] if isinstance(f, dict) and not f.get("module")
                              and str(f.get("filename", "")).endswith(".py")), None)
                if frame is None:
                    continue
                key = f"{frame.get('short_filename') or frame.get('filename')}:{frame.get('line')}"
                if key not in lines:
                    text = linecache.getline(str(frame["filename"]), int(frame.get("line") or 0)).strip()
                    if text:
                        lines[key] = text[:200]
    return lines
