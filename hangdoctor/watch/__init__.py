"""Watching a running job from outside: notice a stall while it happens, keep the verdict, tell someone.

    loop.py       the watch: poll, report a stall once with `attach`'s verdict in a new folder, run --on-hang,
                  record "resumed after N s", end with the job
    slowdown.py   slow, not stalled: iterations PCT% over their running median for a few polls -> one profile
    processes.py  a job known by its local processes (--local, --pid): running while one of them is

Below both the watch and the experiment runner's watchdog (experiments/watchdog.py), in packages of their own:
throughput/logtail.py (the lines a growing log gained), throughput/progress.py (a higher iteration in the log,
a heartbeat file that changed), throughput/stall.py (when silence becomes a stall, and when it clears) and
slurm/jobstate.py (is a SLURM job still running, and how did it end).
"""
