#!/usr/bin/env bash
# On a lent GPU machine: `attach --profile` of gpu_nccl_slow_rank.py (2 NCCL ranks on the one GPU, rank 1's GPU
# work slower), once with the slow rank and once healthy; keep profile.json and the node files.
#   bash tests/hangdoctor/corpus/capture_gpu_profile.sh     # -> $OUT/gpu_profile.tgz (slow/, healthy/)
set -u
export PYTHONUNBUFFERED=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 PYTHONPATH=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/py_spy-*.whl || exit 2
export PATH=/tmp/site/bin:$PATH
work=$(mktemp -d)
for variant in slow healthy; do
    dir=$work/$variant; mkdir -p "$dir/markers"
    slow_ms=$([ $variant = slow ] && echo 20 || echo 0)
    HD_CORPUS_MARKERS=$dir/markers HD_SLOW_MS=$slow_ms setsid python3 -m torch.distributed.run --standalone \
        --nproc-per-node=2 tests/hangdoctor/fixtures/corpus/gpu_nccl_slow_rank.py >"$dir/job.log" 2>&1 &
    job=$!
    for _ in $(seq 120); do [ "$(ls "$dir/markers" | wc -l)" -ge 2 ] && break; sleep 0.5; done
    pids="$(cat "$dir/markers/rank0") $(cat "$dir/markers/rank1")"
    timeout 90 python3 -m hangdoctor attach --pid $pids --profile 15 --py-spy /tmp/site/bin/py-spy --out "$dir/attach" \
        --json >"$dir/profile.json" 2>"$dir/attach.err"
    echo "$variant: attach exit $?; $(tail -c 300 "$dir/job.log" | tr '\n' ' ')"
    kill -- -$job 2>/dev/null; kill $pids 2>/dev/null; sleep 1
done
tar czf "${OUT:-/tmp}/gpu_profile.tgz" -C "$work" slow healthy
