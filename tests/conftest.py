import os

# Children inherit these: one BLAS thread per rank on a 2-core machine, stacks dumped on SIGABRT.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PYTHONFAULTHANDLER", "1")
