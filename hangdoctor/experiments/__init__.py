"""Experiments: run the user's job (or the reference trainer) over a matrix of configurations, catch hung runs,
tabulate and plot; plan the topologies worth running. A tool of its own (docs/experiments.md says why), reached
as `hangdoctor experiment` and `hangdoctor plan`: hangdoctor's command line hosts the two verbs (commands/),
nothing else in hangdoctor imports this package, and this package uses hangdoctor only where a user would:
`hangdoctor attach` as a program on a hung run, and the log tail and stall clock of `hangdoctor watch`.

    matrix           configurations x toggles x repeats (flags or JSON) -> RunSpec list
    trainer_job      the trainer's command line for a topology (slurm.sbatch knows only programs)
    user_program     the user's own per-rank command (--program), its {tp} {pp} {dp} {gpus} {run_dir} filled in
    launch           the launcher protocol; launch_sbatch (slurm.sbatch), launch_torchrun (local torchrun) and
                     launch_script (the user's own batch script, submitted as it is)
    watchdog         follow a run's iteration lines: completed, failed, hung, timed out, never started
    hang             `hangdoctor attach` on a hung run, its verdict kept in the run's folder
    runner           launch -> watch -> diagnose -> stop -> measure, one run at a time
    results, logs    one RunResult per run (figures via throughput.summary); rows from existing logs
    tables, plots    DataFrame/CSV, the seeds' markdown table, a rich table; PNG bar charts
    outputs          what an experiment leaves in its folder
    commands/        the verbs `experiment` and `plan` (plan: throughput.planner's valid topologies)

No torch here: the runs are separate processes. pandas and matplotlib are imported only when tables and plots
are written.
"""
