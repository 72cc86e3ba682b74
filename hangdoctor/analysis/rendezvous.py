"""No rank has started, and the launchers wait in their rendezvous: the job waits for nodes that never joined.

torchrun's agents (and DeepSpeed's, which use torch's elastic agent) meet in a rendezvous before any rank starts;
with `--nnodes=N` (or `MIN:MAX`) they wait there until N agents have joined. A dump holding only agents in
`next_rendezvous` is that hang: the answer is the nodes whose agent is not there (not started, failed, or unable
to reach the endpoint), not any process in the dump.
"""

from __future__ import annotations

from hangdoctor.model import SetAside
from hangdoctor.topology.launcher import flag_number


def rendezvous_wait(set_aside: list[SetAside]) -> str:
    """The sentence for launchers waiting in their rendezvous with no rank started, or "" when that is not it."""
    agents = [a for a in set_aside if a.role == "launcher" and "rendezvous" in a.where]
    if not agents:
        return ""
    wanted = max((flag_number(a.cmdline, ("--nnodes",), least=True) or 0 for a in agents), default=0)
    joined = len(agents)
    counted = (f"their command line asks for {wanted} node{'s' if wanted > 1 else ''} and {joined} agent"
               f"{'s are' if joined > 1 else ' is'} here" if wanted else f"{joined} agent{'s' if joined > 1 else ''} here")
    missing = f": {wanted - joined} node{'s' if wanted - joined > 1 else ''} never joined" if wanted > joined else ""
    return (f"no rank has started: {joined} launcher{'s' if joined > 1 else ''} wait{'s' if joined == 1 else ''} in "
            f"the rendezvous ({counted}{missing}); look at the nodes whose agent is missing (not started, failed, "
            f"or unable to reach the rendezvous endpoint), or start the job with fewer nodes")
