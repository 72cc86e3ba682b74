"""The selected code of the selective workload: a few traced calls per step around unselected library work,
like a training loop's own code around torch (here: fib(18), 8,361 unselected calls per step)."""

from bench.tracing_workloads import library


def forward(values):
    return library.kernel(values)


def step():
    return forward([18])
