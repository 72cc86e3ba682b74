"""The unselected "library" of the selective workload: call-heavy code the tracer must skip."""


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def kernel(values):
    return sum(fib(v) for v in values)
