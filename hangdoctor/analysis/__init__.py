"""Pure analysis: `Collection` -> `Verdict`. No processes, no I/O; tested on recorded dumps.

- `waits`: which collective / p2p / barrier a stack is in, and who called it;
- `tree`: the STAT-style prefix tree with the rank set on every edge;
- `ranks`: one view per rank (status, stack, wait, stuck or progressing across samples);
- `classes`: equivalence classes of stacks, majority first;
- `suspects`: who is out of step with its peers, why, and the likely mismatch;
- `verdict`: all of it in one result dataclass.
"""
