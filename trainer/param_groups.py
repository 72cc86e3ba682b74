"""Which parameters get weight decay: the robust default rule, and Megatron's naive rule (the layernorm-alias fault).

No decay for norms and biases. The default rule decides from facts no alias can change: a parameter with
fewer than 2 dimensions (biases, norm gains and shifts) or owned by a module whose class MRO contains a class
named like a norm. The naive rule is Megatron's `_get_params_for_weight_decay_optimization`: norms are found by
`isinstance(module, LayerNorm)` against the alias, so a `torch.nn.LayerNorm` weight lands in the decay group.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from trainer.norms import LayerNorm

Rule = Callable[[nn.Module, str, nn.Parameter], bool]  # (owning module, local name, param) -> no decay?


def is_norm_class(module: nn.Module) -> bool:
    return any("norm" in cls.__name__.lower() for cls in type(module).__mro__ if cls is not nn.Module)


def robust_no_decay(module: nn.Module, name: str, param: nn.Parameter) -> bool:
    return param.dim() < 2 or is_norm_class(module)


def naive_megatron_no_decay(module: nn.Module, name: str, param: nn.Parameter) -> bool:
    return isinstance(module, LayerNorm) or name == "bias"


def build_param_groups(model: nn.Module, *, weight_decay: float, rule: Rule = robust_no_decay) -> list[dict]:
    """Two AdamW groups, "decay" and "no_decay" (an empty one is dropped). Each parameter is placed once."""
    decay, no_decay, seen = [], [], set()
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if id(param) in seen or not param.requires_grad:
                continue
            seen.add(id(param))
            (no_decay if rule(module, name, param) else decay).append(param)
    groups = [
        {"name": "decay", "params": decay, "weight_decay": weight_decay},
        {"name": "no_decay", "params": no_decay, "weight_decay": 0.0},
    ]
    return [g for g in groups if g["params"]]
