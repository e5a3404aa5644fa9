"""Torch's OpenMP threads wait passively unless the user chose (a spinning wait makes
query embedding many times slower on a shared 2-core machine; see
benchmarks/reports/scale_concurrency.md). Checked in fresh interpreters, where torch is
not imported yet."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import os, sys
if sys.argv[1] == "torch-first":
    import torch
from parrot_parents.embeddings.sentence_transformer import prefer_passive_openmp
prefer_passive_openmp()
print(os.environ.get("OMP_WAIT_POLICY"))
"""


@pytest.mark.parametrize(
    ("preset", "order", "expected"),
    [
        (None, "package-first", "PASSIVE"),
        ("ACTIVE", "package-first", "ACTIVE"),  # the user's choice stands
        (None, "torch-first", "None"),  # too late to matter: left alone
    ],
)
def test_the_wait_policy_is_passive_by_default(
    preset: str | None, order: str, expected: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if preset is not None:
        env["OMP_WAIT_POLICY"] = preset
    out = subprocess.run(
        [sys.executable, "-c", PROBE, order], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.stdout.strip() == expected, out.stderr


def test_loading_the_model_sets_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    code = (
        "import os\n"
        "from parrot_parents.embeddings.sentence_transformer import load_sentence_transformer\n"
        "load_sentence_transformer(None)\n"
        "print(os.environ.get('OMP_WAIT_POLICY'))\n"
    )
    env["HF_HUB_OFFLINE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.stdout.strip().splitlines()[-1] == "PASSIVE", out.stderr
