"""hangdoctor: collect every rank's Python stack from a hung distributed job and say who is stuck where.

Pipeline (no torch, no deepspeed anywhere: it runs on login nodes and inside a hung job's extra srun step):
- `collector/`: stdlib-only per-node collector (`python -m hangdoctor.collector`): finds the job's ranks
  through /proc/PID/environ, dumps them in parallel with py-spy under hard timeouts, keeps raw outputs.
- `sources/`: the front ends that run the collector: given PIDs, a local torchrun job, a SLURM job, a hostfile.
- `formats/`: readers for collector node files and py-spy's JSON and text output -> `model.Collection`.
- `analysis/`: pure functions from a `Collection` to a `Verdict` (prefix tree, classes, waits, suspects).
- `render/`: the verdict as rich text, JSON and a self-contained HTML/SVG picture of the merged tree.
- `commands/`: one module per CLI verb (`attach`, `analyze`), wired by `cli.main`.
"""
