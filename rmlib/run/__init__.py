"""A run: its config (every params section assembled and validated: `config`, the run's own
sections: `sections`), its folder and the folder's lock (`folder`, `lock`), the models it trains
and evaluates (`models`) and the generation backends serving them (`backends`).

This package was the module `rmlib.run` (the notebooks' runner) until 2026-12: the runner's
names now live in rmlib.workbook.execute, and importing one from here says so.
"""

_RUNNER_NAMES = (
    "LIBRARIES", "DISTRIBUTIONS", "OOM_SIGNS", "NotebookFailed", "Interrupted", "results_params",
    "params_hash", "manifest", "installed_version", "NotebookResult", "execute", "oom_hint",
    "notebook_source", "preflight", "check_trl_keys", "check_api_key", "library_hash",
    "point_name", "sweep",
)  # fmt: skip
_DEVICE_NAMES = (
    "GPU_MEMORY_LEEWAY", "check_device", "check_gpu_class", "visible_gpus", "cuda_driver",
)  # fmt: skip
_MOVED_NAMES: dict[str, str] = {
    **dict.fromkeys(_RUNNER_NAMES, "rmlib.workbook.execute"),
    **dict.fromkeys(_DEVICE_NAMES, "rmlib.workbook.device"),
    **dict.fromkeys(("holding", "hold_until_exit", "RunFolderBusy", "LOCK_FILE"), "rmlib.run.lock"),
    **dict.fromkeys(("MEMORY_SETTINGS", "NOT_RESULTS"), "rmlib.config"),
}


def __getattr__(name: str) -> object:
    if name in _MOVED_NAMES:
        raise ImportError(f"rmlib.run.{name} moved: import it from {_MOVED_NAMES[name]}")
    raise AttributeError(f"module 'rmlib.run' has no attribute {name!r}")
