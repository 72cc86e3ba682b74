#!/usr/bin/env bash
# On a lent GPU machine: gpu_nccl_slow_rank.py (2 NCCL ranks on the one GPU) with the Flight Recorder's kernel
# timing on (TORCH_NCCL_ENABLE_TIMING=1) and torch's debug server where it has one; `attach --profile` of it, and
# each rank's recorder dump written by the job. Variants: rank 1's GPU 20 ms slower a step, 1 ms slower, none.
#   bash tests/hangdoctor/corpus/capture_gpu_kernel_times.sh     # -> $OUT/gpu_kernel_times.tgz
set -u
export PYTHONUNBUFFERED=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 PYTHONPATH=$PWD
export TORCH_NCCL_ENABLE_TIMING=1 TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_TRACE_BUFFER_SIZE=2000
[ -x /tmp/site/bin/py-spy ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /tmp/site .whl/py_spy-*.whl || exit 2
export PATH=/tmp/site/bin:$PATH
work=$(mktemp -d)
for variant in slow20 slow1 healthy; do
    dir=$work/$variant; mkdir -p "$dir/markers" "$dir/fr"
    slow_ms=${variant#slow}; [ $variant = healthy ] && slow_ms=0
    port=$((29600 + RANDOM % 300))
    HD_CORPUS_MARKERS=$dir/markers HD_CORPUS_FR=$dir/fr HD_FR_AFTER=9 HD_SLOW_MS=$slow_ms HD_DEBUG_PORT=$port \
        setsid python3 -m torch.distributed.run --standalone --nproc-per-node=2 \
        tests/hangdoctor/fixtures/corpus/gpu_nccl_slow_rank.py >"$dir/job.log" 2>&1 &
    job=$!
    for _ in $(seq 120); do [ "$(ls "$dir/markers" | wc -l)" -ge 2 ] && break; sleep 0.5; done
    pids="$(cat "$dir/markers/rank0") $(cat "$dir/markers/rank1")"
    timeout 60 python3 -m hangdoctor attach --pid $pids --profile 12 --py-spy /tmp/site/bin/py-spy --out "$dir/attach" \
        --json >"$dir/profile.json" 2>"$dir/attach.err"
    echo "$variant: attach exit $?; fr: $(ls "$dir/fr" | tr '\n' ' '); $(tail -c 300 "$dir/job.log" | tr '\n' ' ')"
    kill -- -$job 2>/dev/null; kill $pids 2>/dev/null; sleep 1
done
tar czf "${OUT:-/tmp}/gpu_kernel_times.tgz" -C "$work" slow20 slow1 healthy
