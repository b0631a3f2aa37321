"""rmlib: the library under the ReflectRM workbook's notebooks.

What a reader of an executed notebook should not have to wade through is decided here, once,
before any engine is imported (vLLM reads its variables at import): vLLM's INFO lines and CPU
tuning hints (tcmalloc, Triton without a CPU backend) are cut to errors, and TRL's import-time
warning that it supports vLLM 0.22-0.31 is dropped: we run vLLM 0.32 (the release whose torch pin
is ours) and test what we use of it, the colocate weight sync (tests/test_training_colocate.py).
Two more lines say nothing a reader can act on: vLLM 0.32's Triton dispatcher scans module
attributes and so touches torch's deprecated `torch.distributed.reduce_op` alias (a FutureWarning
per import; nothing of ours uses it), and transformers warns that "mtime may not be reliable" when
two checkpoints are saved within a second (short demo/smoke steps), then orders them by step
number, which is right. tests/test_workbook.py fails a smoke run on any other warning.
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
warnings.filterwarnings(
    "ignore", message=r"`torch\.distributed\.reduce_op` is deprecated", category=FutureWarning
)
logging.getLogger("transformers.trainer_utils").addFilter(
    lambda record: "mtime may not be reliable" not in record.getMessage()
)
