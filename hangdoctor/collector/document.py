"""The node document, typed once: what one collector reports about its node. Stdlib only.

Built by the collector (node.collect, or __main__ when py-spy is missing there), sent as JSON (`to_wire`), and
read by the front end (formats/nodefile.py). `processes` are the ranks found (procs.describe_process) with their
samples; before it travels the document is compacted (compact.py: frames and threads once per node), which
gives the wire format its version: hangdoctor-node/2 (readers also take /1).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field

from hangdoctor.collector import compact

FORMAT = compact.MERGED  # "hangdoctor-node/2"
PYSPY_MISSING = "pyspy-missing"  # the `fatal` value when no stack could be taken on the node
DEADLINE = "deadline reached"  # a node error that begins so: fewer samples than asked were taken


@dataclass
class NodeDocument:
    node: str  # SLURMD_NODENAME in a SLURM step, else the short host name
    options: dict = field(default_factory=dict)  # CollectOptions on the wire, with the selection's match and pids
    pyspy: dict = field(default_factory=lambda: {"path": "", "version": ""})
    processes: list[dict] = field(default_factory=list)  # the ranks found, each with "samples"
    skipped: list[str] = field(default_factory=list)  # processes set aside (launchers, helpers), one line each
    errors: list[str] = field(default_factory=list)
    fatal: str | None = None  # PYSPY_MISSING: nothing could be sampled on this node
    source_lines: dict | None = None  # the source line of each Python frame, innermost ones first (source.py)
    source_blocks: dict | None = None  # the loops and conditions around each frame's line (source.py)
    profile_frames: list[str] | None = None  # with --profile: each distinct frame of the ranks' profiles, once
    hostname: str = field(default_factory=lambda: os.uname().nodename)
    collector_pid: int = field(default_factory=os.getpid)
    python: str = sys.version.split()[0]
    started: float = field(default_factory=time.time)
    finished: float | None = None

    def to_wire(self) -> dict:
        """The JSON-able form, "format" first; fields that are None are left out."""
        return {"format": FORMAT, **{k: v for k, v in asdict(self).items() if v is not None}}
