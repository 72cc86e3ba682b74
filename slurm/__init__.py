"""SLURM helpers (pure Python, no torch, no hangdoctor): job lookup, steps, node lists, hostfiles, sbatch
templates, and a real local test cluster.

    slurm.jobs         scontrol show job / squeue as dataclasses; lookup_running_job() with one-line errors
    slurm.pids         scontrol listpids (rows with task number "-" are helpers, not tasks)
    slurm.steps        run_step_on_each_node(): ONE `srun --overlap` step, bounded, robust to silent nodes
    slurm.stepwrap     the per-node task of that step (standard library only)
    slurm.frames       one JSON record as short numbered lines through srun or pdsh, and back (stdlib only)
    slurm.nodelist     expand_nodelist("gpu[01-04,07]"), compress_nodelist([...])
    slurm.hostfile     `node slots=N` hostfiles, like the seed's makehostfile
    slurm.sbatch       render_sbatch(BatchJob(program, tasks, tasks_per_node)), submit(), wait_until_done()
    slurm.testcluster  LocalCluster: munged + slurmctld + N slurmd on one machine; `python -m slurm.testcluster`
    slurm.errors       SlurmError (message + hint) and its kinds

Importing the package imports nothing else: the step wrapper starts on every node of a job (as
`python -S .../slurm/stepwrap.py`; `python -m slurm.stepwrap` also works) and must be quick.
"""
