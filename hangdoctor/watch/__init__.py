"""Watching a running job from outside: notice a stall while it happens, keep the verdict, tell someone.

    logtail.py   the lines a growing log gained (follows truncation and rotation, regular files only)
    progress.py  what counts as progress: a higher iteration in the log (Megatron lines or a regex), a heartbeat
                 file that changed
    stall.py     when silence becomes a stall (a fixed bound, or one derived from the iteration times seen), and
                 when a stall clears
    jobstate.py  is the job still running, and how did it end (SLURM: scontrol; local: its processes)
    loop.py      the watch: poll, report a stall once with `attach`'s verdict in a new folder, run --on-hang,
                 record "resumed after N s", end with the job

The experiment runner's watchdog (experiments/watchdog.py) uses logtail, progress and stall too.
"""
