"""A distractor corpus of real English prose: the HTML manuals of Debian documentation packages.

Each package of :data:`PACKAGES` is fetched with ``apt-get download`` (from the machine's
configured Debian mirror; no root needed) and unpacked with ``dpkg-deb -x`` into a cache
directory, once; later runs reuse both. Its HTML pages under the package's manual folder
(index pages left out: they are lists of names, not prose) are read by the product's own
HTML reader through :class:`~parrot_parents.loaders.TextLoader` (the visible text and its
headings), each page one document whose id is its path under the cache's ``pkgs`` folder.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["PACKAGES", "fetch", "html_files"]

#: (package, the folder of its HTML manual inside the package), in the order documents are
#: taken: the prose-heaviest manuals first, the Python library reference last.
PACKAGES: tuple[tuple[str, str], ...] = (
    ("debian-handbook", "usr/share/doc/debian-handbook/html/en-US"),
    ("debian-reference-en", "usr/share/debian-reference"),
    ("debian-policy", "usr/share/doc/debian-policy"),
    ("developers-reference", "usr/share/developers-reference"),
    ("postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html"),
    ("git-doc", "usr/share/doc/git-doc"),
    ("bash-doc", "usr/share/doc/bash"),
    ("r-doc-html", "usr/share/R/doc/manual"),
    ("octave-doc", "usr/share/doc/octave/octave.html"),
    ("python3.11-doc", "usr/share/doc/python3.11/html"),
)

#: Page names that are indexes (lists of terms and links), not text.
_INDEX_PAGES = ("genindex", "modindex", "bookindex", "search.html")


def fetch(cache: Path) -> dict[str, str]:
    """Download and unpack every package of :data:`PACKAGES` that ``cache`` lacks.

    Returns ``{package: version}``. Raises ``subprocess.CalledProcessError`` when
    ``apt-get download`` or ``dpkg-deb`` fails (no such package on the mirror, no network).
    """
    debs, pkgs = cache / "debs", cache / "pkgs"
    debs.mkdir(parents=True, exist_ok=True)
    pkgs.mkdir(parents=True, exist_ok=True)
    versions: dict[str, str] = {}
    for package, _ in PACKAGES:
        found = sorted(debs.glob(f"{package}_*.deb"))
        if not found:
            subprocess.run(["apt-get", "download", package], cwd=debs, check=True)
            found = sorted(debs.glob(f"{package}_*.deb"))
        deb = found[-1]
        versions[package] = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        target = pkgs / package
        if not target.is_dir():
            # Unpacked beside, then renamed: an interrupted unpack is never taken as done.
            partial = pkgs / f".{package}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(partial)], check=True)
            partial.rename(target)
    return versions


def html_files(cache: Path) -> list[Path]:
    """The HTML pages of the corpus, in :data:`PACKAGES` order and by path within each.

    Symbolic links are left out, and a page reachable under two paths is read once.
    """
    files: list[Path] = []
    seen: set[Path] = set()
    for package, folder in PACKAGES:
        root = cache / "pkgs" / package / folder
        for p in sorted(root.rglob("*.html")):
            if p.is_symlink() or not p.is_file() or p.name.startswith(_INDEX_PAGES):
                continue
            if p.resolve() not in seen:
                seen.add(p.resolve())
                files.append(p)
    return files
