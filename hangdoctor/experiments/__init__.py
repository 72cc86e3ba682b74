"""The experiment runner behind `hangdoctor experiment`: a matrix of trainer runs, a hang watch that calls
hangdoctor on a hung run before stopping it, and the seeds' tables and plots from the Megatron log lines.

    matrix           configurations x toggles x repeats (flags or JSON) -> RunSpec list
    launch           the launcher protocol; launch_sbatch (slurm.sbatch) and launch_torchrun (local torchrun)
    watchdog         follow a run's iteration lines: completed, failed, hung, timed out, never started
    hang             `hangdoctor attach` on a hung run, its verdict kept in the run's folder
    runner           launch -> watch -> diagnose -> stop -> measure, one run at a time
    results, logs    one RunResult per run (figures via throughput.summary); rows from existing logs
    tables, plots    DataFrame/CSV, the seeds' markdown table, a rich table; PNG bar charts
    outputs          what an experiment leaves in its folder

No torch here: the runs are separate processes. pandas and matplotlib are imported only when tables and plots
are written.
"""
