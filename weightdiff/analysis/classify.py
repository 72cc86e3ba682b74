"""What kind of parameter a TensorMeta is: a norm's gain or shift, a bias, a tensor-parallel duplicate.

Decided from facts that an alias or a subclass cannot hide, each returned as a reason a person can check:
- the owning module's MRO: any class named like a norm (LayerNorm, RMSNorm, MixedFusedLayerNorm, BatchNorm...)
  or defined in torch.nn's normalization / batchnorm modules. `MixedFusedLayerNorm` aliased as `LayerNorm`,
  a plain `torch.nn.LayerNorm`, and a subclass of either are all caught;
- the parameter's name: a leaf "bias", or a module path with a norm-like component ("ln_f", "norm", "layernorm");
- its dimension: a 1-D gain/shift-like vector.
Checkpoints record no classes, so for them only name and dimension speak.
"""

from __future__ import annotations

import re

from weightdiff.records import TensorMeta

NORM_CLASS = re.compile(r"norm", re.IGNORECASE)
NORM_MODULES = ("torch.nn.modules.normalization.", "torch.nn.modules.batchnorm.")
NORM_PATH_PART = re.compile(r"^(ln(_?\w+)?|\w*norm\w*|layernorm\w*)$", re.IGNORECASE)


def short_class(path: str) -> str:
    return path.rsplit(".", 1)[-1] if path else ""


def norm_reason(meta: TensorMeta) -> str | None:
    """Why `meta` belongs to a normalisation layer, or None."""
    for cls in meta.module_mro:
        if cls.startswith(NORM_MODULES) or NORM_CLASS.search(short_class(cls)):
            if cls == meta.module_class:
                return f"module class {cls}"
            return f"module class {meta.module_class} (MRO has {cls})"
    parts = meta.module_path.split(".") if meta.module_path else meta.name.split(".")[:-1]
    if any(NORM_PATH_PART.match(p) for p in parts) and len(meta.shape) <= 1:
        return f"name {meta.name} (a norm-like module path), {len(meta.shape)}-D"
    return None


def is_bias(meta: TensorMeta) -> bool:
    return meta.leaf == "bias"


def is_embedding_norm(meta: TensorMeta) -> bool:
    return norm_reason(meta) is not None and "embed" in meta.name.lower()


def no_decay_reason(meta: TensorMeta) -> str | None:
    """Why this parameter should not be weight-decayed (norm, bias, 1-D), or None."""
    norm = norm_reason(meta)
    if norm is not None:
        what = "an embedding norm" if "embed" in meta.name.lower() else "a norm"
        return f"{what} {meta.leaf}, by {norm}"
    if is_bias(meta):
        return f"a bias ({meta.module_class or 'class unknown'})"
    if len(meta.shape) < 2:
        return f"a {len(meta.shape)}-D parameter ({meta.module_class or 'class unknown'})"
    return None


def tp_duplicate_reason(meta: TensorMeta) -> str | None:
    """Why this parameter should be identical on every tensor-parallel rank, or None when it is (or may be) a
    shard. Megatron's `tensor_model_parallel` attribute decides when the model sets it; otherwise norms,
    row-parallel biases (added after the all-reduce) and parameters of modules that are not *Parallel* layers
    are duplicates."""
    if meta.tp_partitioned is not None:
        return None if meta.tp_partitioned else "tensor_model_parallel=False"
    norm = norm_reason(meta)
    if norm is not None:
        return f"a norm ({norm})"
    classes = [short_class(c) for c in meta.module_mro]
    if is_bias(meta) and any("RowParallel" in c for c in classes):
        return f"a row-parallel bias ({meta.module_class})"
    if meta.module_class and not any("Parallel" in c for c in classes):
        return f"owned by {meta.module_class}, not a *Parallel* layer"
    return None
