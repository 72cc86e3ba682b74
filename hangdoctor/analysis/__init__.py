"""Pure analysis: `Collection` -> `Verdict`. No processes, no I/O; tested on recorded dumps.

- `wait_rules` and `frameworks`: the table of wait kinds (data), and its built-in rows;
- `waits`: what a stack waits in (collective, device sync, lock, ...) and who called it, from the table;
- `launchers`: launchers and helper processes set aside before ranks are numbered;
- `tree`: the STAT-style prefix tree with the rank set on every edge;
- `ranks`: one view per rank (status, stack, wait, activity, peer, stuck or progressing across samples);
- `classes`: equivalence classes of stacks, majority first;
- `places`: ranks in the same place, the anchor (where the job as a whole is), how places relate;
- `suspects`: who is out of step, why, how sure, with the evidence;
- `hints`: the mismatch in coordinates and what to do next;
- `verdict`: all of it in one result dataclass.
"""
