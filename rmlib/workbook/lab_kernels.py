"""The kernel manager of `rmlib lab`'s JupyterLab (`--ServerApp.kernel_manager_class`): Jupyter
Server's own, with the kernels' connection files in a private folder of this lab
(rmlib.workbook.kernels.lab_folder) instead of Jupyter's runtime folder. Jupyter Server passes
its runtime folder as `connection_dir` when it builds the manager, and that argument outranks
any config setting, so the folder is swapped in here. A module of its own: importing Jupyter
Server is the lab's cost alone, not every `rmlib` command's."""

from __future__ import annotations

from typing import Any

from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager

from rmlib.workbook.kernels import lab_folder


class LabKernelManager(AsyncMappingKernelManager):
    """AsyncMappingKernelManager (Jupyter Server's default) with its kernels' connection files
    in `lab_folder()`: removed when the lab exits, swept by the next run or lab if it was
    killed."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["connection_dir"] = str(lab_folder())
        super().__init__(**kwargs)
