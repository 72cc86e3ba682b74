"""No rank has started, and the launchers wait in their rendezvous: the job waits for nodes that never joined.

torchrun's agents (and DeepSpeed's, which use torch's elastic agent) meet in a rendezvous before any rank starts;
with `--nnodes=N` (or `MIN:MAX`) they wait there until N agents have joined. A dump holding only agents in
`next_rendezvous` is that hang: the answer is the nodes whose agent is not there (not started, failed, or unable
to reach the endpoint), not any process in the dump.
"""

from __future__ import annotations

import re

from hangdoctor.model import SetAside

_NNODES = re.compile(r"^--nnodes(?:=(\S+))?$")


def rendezvous_wait(set_aside: list[SetAside]) -> str:
    """The sentence for launchers waiting in their rendezvous with no rank started, or "" when that is not it."""
    agents = [a for a in set_aside if a.role == "launcher" and "rendezvous" in a.where]
    if not agents:
        return ""
    wanted = max((n for n in map(_nnodes, (a.cmdline for a in agents)) if n), default=0)
    joined = len(agents)
    counted = (f"their command line asks for {wanted} node{'s' if wanted > 1 else ''} and {joined} agent"
               f"{'s are' if joined > 1 else ' is'} here" if wanted else f"{joined} agent{'s' if joined > 1 else ''} here")
    missing = f": {wanted - joined} node{'s' if wanted - joined > 1 else ''} never joined" if wanted > joined else ""
    return (f"no rank has started: {joined} launcher{'s' if joined > 1 else ''} wait{'s' if joined == 1 else ''} in "
            f"the rendezvous ({counted}{missing}); look at the nodes whose agent is missing (not started, failed, "
            f"or unable to reach the rendezvous endpoint), or start the job with fewer nodes")


def _nnodes(cmdline: tuple[str, ...]) -> int:
    """The least number of nodes `--nnodes N`, `--nnodes=N` or `--nnodes=MIN:MAX` asks for, 0 when not given."""
    for index, arg in enumerate(cmdline):
        match = _NNODES.match(arg)
        if match is None:
            continue
        value = match[1] if match[1] is not None else (cmdline[index + 1] if index + 1 < len(cmdline) else "")
        first = value.split(":", 1)[0]
        return int(first) if first.isdigit() else 0
    return 0
