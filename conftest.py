"""Test-wide settings (tests/ and the nbval run over notebooks/).

The Hugging Face hub is unreachable here, so any accidental hub call must fail fast. Notebooks
executed by nbval get no papermill parameters: $RMLIB_RUN_DIR (inherited by their kernels) points
them at a fresh run folder of the smoke profile, so a stale folder from an earlier run can never
hide an error.
"""

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RMLIB_RUN_DIR", tempfile.mkdtemp(prefix="rmlib-nbval-smoke-"))
