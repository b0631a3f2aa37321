"""Test-wide settings: the Hugging Face hub is unreachable here, so any accidental call fails fast."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
