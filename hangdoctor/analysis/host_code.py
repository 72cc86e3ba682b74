"""Code that never waits on a GPU: Python's standard library and CPU-only numeric libraries.

py-spy marks a thread active when the OS runs it. Outside any wait the table knows, that alone does not say the
rank is busy: a GPU job's rank spins on the CPU inside CUDA's synchronisation, under whatever Python line called
into torch. But when the innermost Python frame is code that never calls into a GPU runtime (`os.path.exists`,
numpy's `argsort`), an active thread there runs on the host: it is busy, not waiting.

With native frames (`--native`) the question is answered for the whole stack: an active thread none of whose
native frames is a GPU runtime's (libcuda, libcudart, NCCL, torch's CUDA library, HIP, RCCL) runs on the host,
whatever its innermost frame (OpenBLAS's sgemm kernel under numpy, a `stat` system call in a polling loop).

Which Python frames count: `<frozen module>`; a path under `lib/pythonX.Y/` outside site-packages; a relative path
(py-spy shortens paths to the import root) whose first folder is a standard-library package (`json/`,
`multiprocessing/`) or one of HOST_LIBRARIES. A bare file name (`trace.py`) is not enough: a user's script may
share a standard module's name.
"""

from __future__ import annotations

import re
import sys

from hangdoctor.analysis.waits import innermost_python

HOST_LIBRARIES = frozenset({"numpy", "pandas", "scipy", "sklearn", "PIL"})
_STDLIB = frozenset(sys.stdlib_module_names) - {"__main__"}
_GPU_RUNTIME = re.compile(r"libcuda|libcudart|libnccl|libtorch_cuda|libc10_cuda|libamdhip|libhip|librccl|libnvidia")
_FROZEN = re.compile(r"<frozen ([\w.]+)>")
_INSTALLED = re.compile(r"/(?:site|dist)-packages/([^/]+)/")
_STDLIB_DIR = re.compile(r"/lib/python3\.\d+/([^/]+)")


def host_only(file: str) -> bool:
    """Whether a frame of this file never waits on a GPU (module docstring)."""
    frozen = _FROZEN.fullmatch(file)
    if frozen:
        return frozen.group(1).split(".")[0] in _STDLIB
    installed = _INSTALLED.search(file)
    if installed:
        return installed.group(1) in HOST_LIBRARIES
    if file.startswith("/"):
        stdlib = _STDLIB_DIR.search(file)
        return stdlib is not None and stdlib.group(1).removesuffix(".py") in _STDLIB
    first, slash, _ = file.partition("/")
    return bool(slash) and (first in HOST_LIBRARIES or first in _STDLIB)


def runs_on_host(stack) -> bool:
    """Whether an active thread with this stack (innermost first) runs on the host rather than spinning in a GPU
    runtime's wait (module docstring)."""
    if any(frame.native for frame in stack):
        return not any(frame.native and _GPU_RUNTIME.search(frame.file) for frame in stack)
    innermost = innermost_python(stack)
    return innermost is not None and host_only(innermost.file)
