#!/usr/bin/env bash
# On a lent GPU machine: run gpu_nccl_watchdog_timeout.py until NCCL's watchdog ends it, once as a user would first
# (no timing) and once with TORCH_NCCL_ENABLE_TIMING=1; keep each run's log and torch's own Flight Recorder dumps.
#   bash tests/hangdoctor/corpus/capture_gpu_timeout.sh     # -> $OUT/gpu_timeout.tgz (timeout-plain/, timeout-timing/)
set -u
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 TORCH_FR_BUFFER_SIZE=2000
export TORCH_NCCL_DUMP_ON_TIMEOUT=1 PYTHONPATH=$PWD
work=$(mktemp -d)
for variant in plain timing; do
    dir=$work/timeout-$variant
    mkdir -p "$dir/fr"
    start=$(date +%s)
    TORCH_FR_DUMP_TEMP_FILE=$dir/fr/nccl_trace_rank_ TORCH_NCCL_ENABLE_TIMING=$([ $variant = timing ] && echo 1 || echo 0) \
        timeout 120 python3 -m torch.distributed.run --standalone --nproc-per-node=2 \
        tests/hangdoctor/fixtures/corpus/gpu_nccl_watchdog_timeout.py >"$dir/job.log" 2>&1
    echo "$variant: exit $? after $(( $(date +%s) - start )) s; $(ls "$dir/fr" | tr '\n' ' ')"
done
tar czf "${OUT:-/tmp}/gpu_timeout.tgz" -C "$work" timeout-plain timeout-timing
