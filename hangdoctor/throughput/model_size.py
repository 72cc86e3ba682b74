"""GPT model size the way the seeds count it, and the shape figures they print next to it.

    params = l(12h^2 + 13h) + vh + sh + 2h          (Megatron GPT: l blocks, word and position embeddings,
                                                      final LayerNorm)
    block  = 12h^2 + 13h                             (QKV + projection + 4h MLP + biases + two LayerNorms)
    ratio  = int(h / l)                              (the seeds' layers-to-hidden ratio: 104B 180, 175B 128)

These reproduce the seeds' one-liners, e.g. `h=12288 l=80 s=2048 v=50257` -> "Model size: 146B, ratio=153".
"""

from __future__ import annotations

from dataclasses import dataclass


def block_params(hidden: int) -> int:
    """Parameters of one transformer block."""
    return 12 * hidden**2 + 13 * hidden


def embedding_params(vocab: int, hidden: int) -> int:
    """Word embedding (tied with the output layer): v x h."""
    return vocab * hidden


def model_params(*, layers: int, hidden: int, vocab: int, seq_length: int) -> int:
    return layers * block_params(hidden) + vocab * hidden + seq_length * hidden + 2 * hidden


def layers_to_hidden_ratio(*, layers: int, hidden: int) -> int:
    return int(hidden / layers)


def padded_vocab_size(vocab: int, *, tp: int = 1, divisible_by: int = 128) -> int:
    """Megatron pads the vocabulary to a multiple of divisible_by x TP (250680 -> 250880 for TP 4 or 8)."""
    multiple = divisible_by * tp
    return -(-vocab // multiple) * multiple


@dataclass(frozen=True)
class ModelShape:
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_length: int

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "vocab", "seq_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")

    @property
    def params(self) -> int:
        return model_params(layers=self.layers, hidden=self.hidden, vocab=self.vocab, seq_length=self.seq_length)

    @property
    def block_params(self) -> int:
        return block_params(self.hidden)

    @property
    def embedding_params(self) -> int:
        return embedding_params(self.vocab, self.hidden)

    @property
    def ratio(self) -> int:
        return layers_to_hidden_ratio(layers=self.layers, hidden=self.hidden)

    def describe(self) -> str:
        """The seeds' print: "Model size: 146B, ratio=153" (and "Model size: 210K, ratio=16" for a small one)."""
        return f"Model size: {format_params(self.params)}, ratio={self.ratio}"


def format_params(params: int | None) -> str:
    """A parameter count as the seeds write it: 146B, 7.5B, 350M, 210K (three significant digits at most)."""
    if not params:
        return "-"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if params >= scale:
            value = params / scale
            return f"{value:.0f}{unit}" if value >= 10 else f"{value:.1f}{unit}"
    return str(params)
