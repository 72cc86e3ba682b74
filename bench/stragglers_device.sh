#!/usr/bin/env bash
# bench/stragglers.py on a lent machine with a core per rank (the device's 16 CPU cores; its GPU is not used: the
# DDP example runs on gloo), to tell what this 2-core machine's oversubscription costs the profile's accuracy.
# Here, once: wheels of hangdoctor's dependencies for the device's Python (3.12) in .i27_carry/whl (ignored):
#   .venv/bin/pip download -d .i27_carry/whl --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 --implementation cp py-spy==0.4.3 psutil rich orjson
# There (run tool, carry [".i27_carry"]): bash bench/stragglers_device.sh [bench/stragglers.py's arguments]
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .i27_carry/whl/*.whl || exit 2
cp /tmp/site/bin/py-spy "$(dirname "$(python3 -c 'import sys; print(sys.executable)')")/" || exit 2
export PYTHONPATH="/tmp/site:$PWD"
nproc; python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__)"
python3 bench/stragglers.py --keep /tmp/kept "$@" 2>&1 | tee "${OUT:-/tmp}/stragglers.log"
status=${PIPESTATUS[0]}
tar czf "${OUT:-/tmp}/kept.tgz" -C /tmp kept
exit "$status"
