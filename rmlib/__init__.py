"""rmlib: the library under the ReflectRM workbook's notebooks.

What a reader of an executed notebook should not have to wade through is decided here, once,
before any engine is imported (vLLM reads its variables at import): vLLM's INFO lines and CPU
tuning hints (tcmalloc, Triton without a CPU backend) are cut to errors, and TRL's import-time
warning that it supports vLLM 0.22-0.31 is dropped: we run vLLM 0.32 (the release whose torch pin
is ours) and test what we use of it, the colocate weight sync (tests/test_training_colocate.py).
"""

import logging
import os
import warnings

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "1")
# Imported through TRL, vLLM can log before it configures its logger (the Triton hint then
# reaches stderr through Python's last-resort handler); its logger's level holds either way.
logging.getLogger("vllm").setLevel(os.environ["VLLM_LOGGING_LEVEL"])
warnings.filterwarnings(
    "ignore", message="TRL currently supports vLLM versions", category=UserWarning
)
