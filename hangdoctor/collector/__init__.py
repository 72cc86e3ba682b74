"""The per-node collector: stdlib only, so that it runs under whatever Python a job's extra step has.

`python -m hangdoctor.collector --py-spy PATH --match SLURM_JOB_ID=1234` prints one JSON document (format
`hangdoctor-node/1`) with every matching rank's identity, /proc state, CPU use and raw py-spy output.
It imports nothing from hangdoctor outside this package.
"""
