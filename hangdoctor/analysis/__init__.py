"""Pure analysis: `Collection` -> `Verdict`. No processes, no I/O; tested on recorded dumps.

- `wait_rules` and `frameworks`: the table of wait kinds (data), and its built-in rows;
- `waits`: what a stack waits in (collective, device sync, lock, ...) and who called it, from the table;
- `launchers`: launchers and helper processes set aside before ranks are numbered;
- `tree`: the STAT-style prefix tree with the rank set on every edge;
- `ranks`: one view per rank (status, stack, wait, activity, peer, stuck or progressing across samples);
- `classes`: equivalence classes of stacks, majority first;
- `places`: ranks in the same place, the anchor (where the job as a whole is), how places relate;
- `call_semantics`: whom a call waits for (data rows: pipeline stages, data-parallel groups, schedules' phases);
- `waitgraph`: the wait-for graph, "A waits for B" with the evidence of each edge;
- `ahead`: which of two ranks went further along the program (their stacks' divergence point, the source's loops);
- `causes`: the cause read off the graph (sinks, cycles broken by evidence, schedule, odd one out, program order);
- `suspects`: who is out of step, why, how sure, with the evidence, ordered by the graph's causes;
- `roles`: what each rank is in the verdict (suspect, waiting, ...), once per verdict, for the pictures;
- `hints`: the mismatch in coordinates and what to do next;
- `verdict`: all of it in one result dataclass.
"""
