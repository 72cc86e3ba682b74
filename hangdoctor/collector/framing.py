"""A node document through a transport that cuts long lines: short numbered frames, and back. Stdlib only.

    hangdoctor-chunk NODE I N TEXT

srun cuts `--label`led lines at 1,024 bytes and pdsh at 128 KiB, and both add a prefix ("0: ", "host: "): the
collector prints its compact JSON in frames of FRAME_SIZE characters, the front end finds them wherever the
prefix leaves them and joins each node's frames; a node whose frames are not all there did not answer whole.
"""

from __future__ import annotations

import json

MARK = "hangdoctor-chunk "
FRAME_SIZE = 800


def frame_lines(doc: dict) -> list[str]:
    text = json.dumps(doc, separators=(",", ":"))  # compact JSON has no newline
    pieces = [text[i:i + FRAME_SIZE] for i in range(0, len(text), FRAME_SIZE)] or [""]
    node = str(doc.get("node") or "node").replace(" ", "_")
    return [f"{MARK}{node} {index} {len(pieces)} {piece}" for index, piece in enumerate(pieces)]


def read_frames(stdout: str) -> tuple[list[dict], list[str]]:
    """(documents, nodes whose frames were incomplete or unreadable), whatever prefix the transport added."""
    parts: dict[str, dict[int, str]] = {}
    counts: dict[str, int] = {}
    for line in stdout.splitlines():
        start = line.find(MARK)
        if start < 0:
            continue
        fields = line[start + len(MARK):].split(" ", 3)
        if len(fields) < 3 or not fields[1].isdigit() or not fields[2].isdigit():
            continue
        node, index, total = fields[0], int(fields[1]), int(fields[2])
        parts.setdefault(node, {})[index] = fields[3] if len(fields) > 3 else ""
        counts[node] = total
    docs, broken = [], []
    for node, pieces in parts.items():
        if len(pieces) != counts[node]:
            broken.append(node)
            continue
        try:
            docs.append(json.loads("".join(pieces[i] for i in range(counts[node]))))
        except (ValueError, KeyError):
            broken.append(node)
    return docs, broken
