"""Call-heavy pure Python: every call is selected. One step = fib(20), 21,891 calls."""


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def step():
    return fib(20)
