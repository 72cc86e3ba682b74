#!/usr/bin/env bash
# Record GPU corpus cases on a lent GPU machine (no network there): py-spy comes from a carried wheel folder.
# Here, once: pip download the py-spy wheel into .whl/ (ignored); there:
#   bash tests/hangdoctor/corpus/record_gpu.sh CASE [CASE...]   # each case recorded on its own, a tarball in $OUT
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/py_spy-*.whl || exit 2
cp /tmp/site/bin/py-spy "$(dirname "$(python3 -c 'import sys; print(sys.executable)')")/" || exit 2
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), torch.cuda.get_device_name(0))"
failed=0
for case in "$@"; do
    start=$(date +%s)
    timeout "${HD_CASE_TIMEOUT:-240}" python3 -m tests.hangdoctor.corpus.record "$case" || { failed=1; echo "FAILED: $case"; }
    echo "$case: $(( $(date +%s) - start )) s"
done
tar czf "${OUT:-/tmp}/gpu_cases.tgz" $(for c in "$@"; do echo tests/hangdoctor/corpus/$c; done)
exit $failed
