#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv: torch==2.13.0 first when torch is absent (the CPU wheel on
# these machines; any other spec pulls a multi-GB CUDA build), then the project with its extras.
# Usage: scripts/bootstrap.sh [VENV_DIR]   (default .venv). Idempotent: a second run only reinstalls the project.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
    echo "bootstrap: creating $venv with $($python --version 2>&1)" >&2
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check -q)
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    echo "bootstrap: installing torch==2.13.0 first" >&2
    "${pip[@]}" "torch==2.13.0"
fi
echo "bootstrap: installing the project with its extras [train,test]" >&2
"${pip[@]}" -e ".[train,test]"
touch "$venv/.installed"
