"""Megatron log lines and throughput/memory math (pure Python, no torch), shared by the trainer and hangdoctor."""
