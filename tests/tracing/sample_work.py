"""Small traced code for in-process tests: a step that calls a layer, and a rank-dependent branch."""


def layer(x):
    return x * 2


def step(rank, i):
    value = layer(i)
    if rank == 1 and i == 2:
        return odd_one_out(value)
    return value


def odd_one_out(value):
    return layer(value)


def train(rank, steps=4):
    return [step(rank, i) for i in range(steps)]
