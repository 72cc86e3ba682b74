"""One JSON record through a transport that cuts and prefixes lines: short numbered frame lines, and back.

    HANGDOCTOR-FRAME <sender> <i>/<n> <part>

<part> is a piece of the record's JSON, zlib-compressed and base64-encoded (no spaces, no newlines), at most
FRAME_SIZE characters. srun cuts `--label`led lines at 1,024 bytes and prefixes them ("  0: "), pdsh prefixes
its hosts' lines ("host: "): a frame is found wherever such a prefix leaves it, and the prefix tells the writers
apart, so two senders that call themselves alike are never mixed. A sender whose frames did not all arrive, or
do not decode, did not answer whole: it is reported with the reason, never half-read.

Both paths that bring a node's answer back use it: the step wrapper's record under srun (slurm.stepwrap) and the
collector's node document under pdsh (hangdoctor.collector). Standard library only, and cheap to import: it runs
in a fresh Python on every node (binascii rather than base64, which imports re).
"""

from __future__ import annotations

import binascii
import json
import zlib
from collections.abc import Iterable

MARK = "HANGDOCTOR-FRAME "
FRAME_SIZE = 800  # characters of base64 per frame line, well under srun's 1,024-byte line limit


def encode(record: dict, sender: str) -> list[str]:
    """The frame lines of `record`, sent by `sender` (a node name; spaces become underscores)."""
    data = binascii.b2a_base64(zlib.compress(json.dumps(record, separators=(",", ":")).encode(), 6),
                               newline=False).decode("ascii")
    parts = [data[i:i + FRAME_SIZE] for i in range(0, len(data), FRAME_SIZE)] or [""]
    sender = sender.replace(" ", "_") or "node"
    return [f"{MARK}{sender} {i}/{len(parts)} {part}" for i, part in enumerate(parts, 1)]


def decode(lines: Iterable[str]) -> tuple[list[tuple[str, dict]], dict[str, str]]:
    """([(sender, record)] in order of first arrival, {sender: why its record is incomplete}).

    Lines without a frame are ignored; whatever stands before the mark (a transport's prefix) tells writers apart.
    """
    parts: dict[tuple[str, str], dict[int, str]] = {}
    totals: dict[tuple[str, str], int] = {}
    for line in lines:
        start = line.find(MARK)
        if start < 0:
            continue
        fields = line[start + len(MARK):].split(" ")
        if len(fields) != 3 or "/" not in fields[1]:
            continue
        sender, (index, total), part = fields[0], fields[1].split("/", 1), fields[2]
        if not (index.isdigit() and total.isdigit()):
            continue
        key = (line[:start].strip(), sender)
        parts.setdefault(key, {})[int(index)] = part
        totals[key] = int(total)
    records, incomplete = [], {}
    for key, got in parts.items():
        sender, total = key[1], totals[key]
        if any(i not in got for i in range(1, total + 1)):
            arrived = sum(1 for i in got if 1 <= i <= total)
            incomplete[sender] = f"its report was cut short: {arrived} of {total} parts arrived"
            continue
        try:
            record = json.loads(zlib.decompress(binascii.a2b_base64("".join(got[i] for i in range(1, total + 1)))))
        except (ValueError, zlib.error) as err:
            incomplete[sender] = f"its report did not decode: {err}"
            continue
        if not isinstance(record, dict):
            incomplete[sender] = "its report is not a JSON object"
            continue
        records.append((sender, record))
    return records, incomplete
