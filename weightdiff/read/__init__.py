"""Readers: dump sidecars, DeepSpeed checkpoint folders, and the tensor values behind both."""
