"""Loading the model from Python draws no weight-loading bar, and leaves transformers' and
huggingface_hub's progress-bar settings as the user had them. Checked in a fresh
interpreter: the model is loaded once per process."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
from huggingface_hub import utils as hub
from transformers.utils import logging as transformers_logging
from parrot_parents.embeddings.sentence_transformer import load_sentence_transformer
load_sentence_transformer(None)
print(transformers_logging.is_progress_bar_enabled(), hub.are_progress_bars_disabled())
"""


def test_a_python_model_load_draws_no_bar_and_keeps_the_users_settings() -> None:
    quiet = ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TQDM_DISABLE")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    env["HF_HUB_OFFLINE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "Loading weights" not in out.stderr
    assert "it/s" not in out.stderr
    assert out.stdout.split() == ["True", "False"]  # bars on, as before the load
