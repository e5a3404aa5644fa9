"""A model load without transformers' weight-loading bar.

transformers draws a tqdm bar ("Loading weights") on stderr each time a model is built,
which in a program that uses the package as a library reads as its own output.
:func:`quiet_model_load` turns transformers' bars off for the load only and then puts back
what the user had: the bars of their own later loads and downloads are theirs to show.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["quiet_model_load"]

# The switch is process-wide: loads that overlapped would put it back out of order.
_LOAD_LOCK = threading.RLock()


@contextmanager
def quiet_model_load() -> Iterator[None]:
    """Inside: transformers' progress bars off. After: on again if they were on before,
    and huggingface_hub's bars (which transformers switches with its own) as they were.
    Loads inside it run one at a time (embedding model and cross-encoder alike).
    """
    from huggingface_hub.utils.tqdm import are_progress_bars_disabled, disable_progress_bars

    # Its switches carry no annotations.
    transformers_logging: Any = importlib.import_module("transformers.utils.logging")
    with _LOAD_LOCK:
        if not transformers_logging.is_progress_bar_enabled():
            yield
            return
        hub_was_off = are_progress_bars_disabled()
        transformers_logging.disable_progress_bar()
        try:
            yield
        finally:
            transformers_logging.enable_progress_bar()
            if hub_was_off:
                disable_progress_bars()
