"""Megatron-style tensor parallelism written by hand: collectives (comms.py) and the layers built on them (layers.py)."""
