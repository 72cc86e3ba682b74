"""One row of the wait table (wait_rules.py says what the table is and how a row is read): its fields, and the
kinds, confidences and roles a row may take. Apart from the table so that the rows (frameworks.py) and the table's
loader (wait_rules.py) both import it, and neither the other's module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoctor.clicore.inputs import check_field_types
from hangdoctor.clicore.regex import compile_user_regex

KINDS = ("collective", "p2p", "barrier", "work-wait", "ddp-reducer", "store", "device-sync", "lock", "dataloader",
         "sleep", "io", "launcher", "worker")
COMM_KINDS = frozenset({"collective", "p2p", "barrier", "work-wait", "ddp-reducer", "store"})
LOCAL_KINDS = frozenset({"lock", "dataloader", "sleep", "io"})
SURE = ("high", "medium", "low")
ROLES = ("wait", "layer", "work", "process")
KINDLESS_ROLES = ("layer", "work")  # rows that name no wait kind

@dataclass(frozen=True)
class WaitRule:
    kind: str  # one of KINDS ("" for a layer row)
    framework: str  # whose frames these are, e.g. "torch.distributed", "deepspeed", "python"
    file: str  # a part of the frame's file (py-spy's short file name); "" matches any file
    function: str  # regular expression, matched in full against the qualified name or its last dotted part
    op: str = ""  # the op to report; "" = the frame's own name when it is an op name, else the kind
    native: bool = False  # matches native frames (py-spy --native) instead of Python ones
    says: str = ""  # what it waits on, in words, for the report
    sure: str = "high"  # how sure the frame alone makes us: high, medium, low
    role: str = "wait"  # "wait", "layer" (transparent), "work" (computes: no wait below it is waited in) or
    # "process" (what the process is)
    weight: int = 1  # 0: generic (threading, queues, sockets, libc); 1: a framework's own wait
    idle: bool = False  # a worker's loop waiting for its next task: it holds nobody up unless peers wait for it
    origin: str = "built-in"  # or the file a user's row came from
    _pattern: re.Pattern = field(init=False, repr=False, compare=False)
    _files: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.role not in ROLES:
            raise ValueError(f"role {self.role!r} is not one of {', '.join(ROLES)}")
        if self.role not in KINDLESS_ROLES and self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.sure not in SURE:
            raise ValueError(f"sure {self.sure!r} is not one of {', '.join(SURE)}")
        object.__setattr__(self, "_pattern", compile_user_regex(self.function or ".*", "function"))
        # the `multiprocess` package (dill's fork of multiprocessing, which HF datasets uses) has the same files
        twin = self.file.replace("multiprocessing/", "multiprocess/", 1) if "multiprocessing/" in self.file else ""
        object.__setattr__(self, "_files", (self.file, twin) if twin else (self.file,))

    def matches(self, name: str, file: str, native: bool) -> bool:
        if native != self.native or (self.file and not any(f in file for f in self._files)):
            return False
        pattern = self._pattern
        return pattern.fullmatch(name) is not None or pattern.fullmatch(name.rsplit(".", 1)[-1]) is not None
