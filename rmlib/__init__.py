"""rmlib: the library under the ReflectRM workbook's notebooks.

Importing it first silences, once, the library lines a notebook reader cannot act on
(`rmlib.quiet` lists each with its reason), here and in the engine processes it starts.

Its packages are floors in the order of the flow (docs/architecture.md; import-linter holds
them): config → data → generation → judge → reflect / training / scoring → run → analysis →
plots → workbook → tools → cli. A module that moved between floors is named in MOVED: importing
its old name says where it went.
"""

import sys
from importlib.abc import MetaPathFinder

from rmlib import quiet

quiet.apply()

# The modules of rmlib before its floors (2026-12), and where their contents went.
MOVED: dict[str, str] = {
    "rmlib.backends": "rmlib.run.backends (a run's models) and rmlib.generation.backends "
    "(the one backend builder)",
    "rmlib.fetch": "rmlib.workbook.fetch",
    "rmlib.judging": "rmlib.tools.judge",
    "rmlib.lab": "rmlib.workbook.lab",
    "rmlib.models": "rmlib.generation.models",
    "rmlib.pipeline": "rmlib.workbook.steps",
    "rmlib.plan": "rmlib.workbook.plan",
    "rmlib.preflight": "rmlib.workbook.preflight",
    "rmlib.prompts": "rmlib.judge.prompts",
    "rmlib.report": "rmlib.workbook.report",
    "rmlib.reward_judge": "rmlib.tools.reward",
    "rmlib.run_facts": "rmlib.workbook.facts",
    "rmlib.run_folder": "rmlib.run.folder",
    "rmlib.run_models": "rmlib.run.models",
    "rmlib.serve": "rmlib.generation.servers (the servers), rmlib.run.backends (a run's: "
    "served, run_spec) and rmlib.tools.serve (checkpoint_spec)",
    "rmlib.verdict": "rmlib.judge.verdict",
}


class _Moved(MetaPathFinder):
    """Consulted last, for a module no other finder found: an old rmlib name says where it went
    rather than only that it does not exist (an ImportError: `from rmlib import judging` would
    swallow a ModuleNotFoundError of that name)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname in MOVED:
            raise ImportError(
                f"{fullname} moved: import {MOVED[fullname]} instead (docs/architecture.md)",
                name=fullname,
            )


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.append(_Moved())
