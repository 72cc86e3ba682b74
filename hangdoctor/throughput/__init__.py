"""Megatron log lines and throughput/memory math (pure Python, no torch), shared by the trainer and hangdoctor.

    logline        IterationStats + format_iteration_line: the line the trainer prints
    megatron_log   parse_iteration_line / parse_log: Megatron(-DeepSpeed) lines back into numbers
    summary        summarize(): medians after the warm-up, saying which iterations they cover
    flops          megatron_tflops (Narayanan et al.), estimated_tflops (the seeds'), training days/GPU hours
    model_size     l(12h^2 + 13h) + vh + sh + 2h, the layers-to-hidden ratio, Megatron's vocab padding
    memory         per-GPU model states (18 bytes/param, TP, PP, ZeRO over DP, embeddings) and activations
    validity       check_topology(): the divisibility rules and the tile/wave/fused-softmax hints
    planner        plan_topologies(): valid (TP, PP, DP, MBS) with memory per GPU, TP within a node
    render         render_plan() (rich) and plan_to_dict() (--json)
    logtail        the lines a growing log gained (follows truncation and rotation, regular files only)
    progress       what counts as progress: a higher iteration in the log (Megatron lines or a regex), a
                   heartbeat file that changed
    stall          when silence becomes a stall (a fixed bound, or one derived from the iteration times seen)
"""
