"""The slurm suite uses `slurm_cluster`, defined in tests/conftest.py and shared with the other suites: one real
local SLURM cluster per test session (slurm/testcluster.py), about a second to start, stopped at the end of the
session (a watchdog stops it if the session is killed). Tests must not assume job ids: ids keep counting.
"""
