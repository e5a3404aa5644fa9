"""Find AVX-512 instructions in x86-64 machine code, per function, with binutils' objdump.

An instruction is AVX-512 when it is EVEX-encoded (its opcode starts with the byte 0x62,
which in 64-bit mode means nothing else: Intel SDM vol. 2, 2.7) or names an opmask
register ``%k0``–``%k7`` (the ``kmov``/``kand`` family is VEX-encoded). This covers the
zmm registers, xmm/ymm 16–31 and EVEX forms of 128/256-bit instructions alike.

A CPU without AVX-512 stops with SIGILL on the first one it meets, so a binary that must
run anywhere may hold them only in functions it calls after a CPUID check.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

__all__ = ["DISPATCHED", "avx512_by_function", "undispatched"]

#: Functions that hold AVX-512 code and are only called after a run-time CPU check.
DISPATCHED = frozenset(
    {
        # pgvector 0.8, src/bitutils.c: picked by SupportsAvx512Popcount() (CPUID + XGETBV).
        "BitHammingDistanceAvx512Popcount",
        "BitJaccardDistanceAvx512Popcount",
        # PostgreSQL 18, src/port/pg_popcount_avx512.c and pg_crc32c_avx512.c: picked by
        # pg_popcount_avx512_available() and pg_crc32c_avx512_available() (CPUID).
        "pg_popcount_avx512",
        "pg_popcount_masked_avx512",
        "pg_comp_crc32c_avx512",
    }
)

_FUNCTION = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
_INSN = re.compile(r"^\s*[0-9a-f]+:\t(?P<bytes>(?:[0-9a-f]{2} )+)\s*\t?(?P<text>.*)$")
_OPMASK = re.compile(r"%k[0-7]\b")
# Prefixes that may stand before an opcode; EVEX itself admits none but 0x67 and segments,
# the rest are skipped so that a wrongly prefixed 0x62 is still seen.
_PREFIXES = frozenset({"66", "67", "f2", "f3", "2e", "3e", "26", "64", "65", "36"})


def objdump() -> str | None:
    """The path of binutils' objdump, or None when it is not installed."""
    return shutil.which("objdump")


def avx512_by_function(binary: Path) -> Counter[str]:
    """How many AVX-512 instructions each function of ``binary`` holds (none: absent).

    Raises:
        subprocess.CalledProcessError: objdump could not read the file.
    """
    tool = objdump()
    assert tool is not None, "binutils' objdump is needed"
    listing = subprocess.run(
        [tool, "-d", "--insn-width=15", str(binary)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: Counter[str] = Counter()
    function = "?"
    for line in listing.splitlines():
        head = _FUNCTION.match(line)
        if head:
            function = head["name"].split("@")[0]
            continue
        insn = _INSN.match(line)
        if not insn:
            continue
        raw = insn["bytes"].split()
        i = 0
        while i < len(raw) and raw[i] in _PREFIXES:
            i += 1
        if (i < len(raw) and raw[i] == "62") or _OPMASK.search(insn["text"]):
            found[function] += 1
    return found


def undispatched(binaries: list[Path]) -> dict[str, Counter[str]]:
    """Per file name, the functions outside :data:`DISPATCHED` that hold AVX-512 code."""
    report: dict[str, Counter[str]] = {}
    for binary in binaries:
        hits = Counter({f: n for f, n in avx512_by_function(binary).items() if f not in DISPATCHED})
        if hits:
            report[binary.name] = hits
    return report
