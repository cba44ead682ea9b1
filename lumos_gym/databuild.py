"""Which data build a training file came from: the build's id and checksums, for the cards.

``lumos-gym data build`` writes, in its ``splits.json``, a ``build`` entry: the SHA-256 of every
file it wrote (``annotations/``, ``train/``, ``test/``) and an id, the first 16 hex digits of the
SHA-256 of those (name, checksum) lines. Two builds with the same id hold the same files, so a
card's id can be checked against a build made again from the same commit
(``lumos-gym data build`` then ``python -m lumos_gym.databuild DATA``).

A mixture drawn from a build (``reproduce``'s ``OUT/mixture/``) writes ``mixture.json`` beside
its files: the build's id, the mixture's seed and its records per domain.

A training file's build is found from its path: ``DATA/train/<format>.jsonl`` reads
``DATA/splits.json``, ``OUT/mixture/<format>.jsonl`` reads ``OUT/mixture/mixture.json``. A file
from anywhere else has no recorded build (``None``: the card then says "unknown").
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lumos_gym.envs.sources import file_sha256

#: The file of a data build listing its splits (and, since builds are identified, its id).
SPLITS_FILE = "splits.json"

#: The file a mixture drawn from a data build writes beside its records.
MIXTURE_FILE = "mixture.json"

#: The folders of a data build whose files the id covers.
BUILD_FOLDERS = ("annotations", "train", "test")


def build_digest(folder: str | Path) -> dict[str, Any]:
    """The id and per-file SHA-256 of the data build in ``folder``."""
    folder = Path(folder)
    files = {
        f"{sub}/{path.name}": file_sha256(path)
        for sub in BUILD_FOLDERS
        for path in sorted((folder / sub).glob("*.jsonl"))
    }
    lines = "".join(f"{name} {digest}\n" for name, digest in sorted(files.items()))
    return {"id": hashlib.sha256(lines.encode("utf-8")).hexdigest()[:16], "files": files}


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def recorded_build(folder: str | Path) -> dict[str, Any] | None:
    """The ``build`` entry a data build's ``splits.json`` holds (``None``: an older build)."""
    manifest = _read(Path(folder) / SPLITS_FILE)
    build = (manifest or {}).get("build")
    return build if isinstance(build, dict) and build.get("id") else None


def mixture_record(build: Mapping[str, Any] | None, *, seed: int,
                   mix: Mapping[str, int] | None) -> dict[str, Any]:
    """What ``mixture.json`` holds: the build's id (``None`` when unknown), seed and mix."""
    return {"data_build": (build or {}).get("id"), "seed": seed,
            "mix": dict(mix) if mix is not None else "all"}


def file_build(path: str | Path) -> dict[str, Any] | None:
    """The data build a training file came from (see the module docstring), or ``None``.

    Returns ``{"id": ..., "from": "build"}``, or with ``"from": "mixture"`` the mixture's
    ``seed`` and ``mix`` as well.
    """
    path = Path(path).resolve()
    mixture = _read(path.parent / MIXTURE_FILE)
    if mixture is not None and mixture.get("data_build"):
        return {"id": mixture["data_build"], "from": "mixture", "seed": mixture.get("seed"),
                "mix": mixture.get("mix")}
    if path.parent.name == "train":
        build = recorded_build(path.parent.parent)
        if build is not None:
            return {"id": build["id"], "from": "build"}
    return None


def files_build(paths: Sequence[str | Path]) -> dict[str, Any] | None:
    """The one data build of every training file, ``None`` when any is unknown or they differ."""
    builds = [file_build(p) for p in paths]
    if not builds or any(b is None for b in builds):
        return None
    ids = {b["id"] for b in builds if b is not None}
    return builds[0] if len(ids) == 1 else None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lumos_gym.databuild DATA``: print the id of a build and whether it matches."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m lumos_gym.databuild DATA_FOLDER", file=sys.stderr)
        return 2
    digest = build_digest(args[0])
    recorded = recorded_build(args[0])
    print(f"{args[0]}: data build {digest['id']} ({len(digest['files'])} files)")
    if recorded is not None and recorded["id"] != digest["id"]:
        print(f"  differs from the id its splits.json records, {recorded['id']}")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - a command
    raise SystemExit(main())
