"""Official dataset files: where they come from, where they go, and their checksums.

``lumos-gym data download NAME`` fetches a dataset's official files from its canonical location
into the cache (``$LUMOS_GYM_CACHE/data/NAME``, default ``~/.cache/lumos-gym``), writing each
file atomically and recording its SHA-256 in ``checksums.json`` beside it. A later download
checks the recorded (or pinned) checksum. Offline, the command says exactly which URL to fetch
and where to put the file, so the files can be carried in by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lumos_gym.errors import DataError
from lumos_gym.registry import Registry


@dataclass(frozen=True)
class DataFile:
    """One official file of a dataset.

    Attributes:
        split: the split the file holds (``"train"``, ``"test"``...).
        filename: the name it gets in the cache.
        url: its canonical location.
        sha256: a pinned checksum, or None to record the first download's.
    """

    split: str
    filename: str
    url: str
    sha256: str | None = None


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset whose official files lumos-gym knows how to fetch and read.

    Attributes:
        name: the short name used on the command line.
        files: its official files.
        homepage: where the dataset is described.
        license: its license, as its authors state it.
        hub: an optional Hugging Face ``(repo_id, config)`` holding the same data.
    """

    name: str
    files: tuple[DataFile, ...]
    homepage: str
    license: str
    hub: tuple[str, str | None] | None = None
    notes: str = ""
    splits: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "splits", tuple(dict.fromkeys(f.split for f in self.files)))

    def file(self, split: str) -> DataFile:
        """Return the file of ``split``."""
        for data_file in self.files:
            if data_file.split == split:
                return data_file
        raise DataError(f"{self.name} has no split {split!r}; splits: {', '.join(self.splits)}")


DATASETS: Registry[DatasetInfo] = Registry("dataset")


def register_dataset(info: DatasetInfo) -> None:
    """Add a dataset to :data:`DATASETS`."""
    DATASETS.register(info.name, info)


_GSM8K = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data"
register_dataset(
    DatasetInfo(
        name="gsm8k",
        files=(
            DataFile("train", "train.jsonl", f"{_GSM8K}/train.jsonl"),
            DataFile("test", "test.jsonl", f"{_GSM8K}/test.jsonl"),
            DataFile("train_socratic", "train_socratic.jsonl", f"{_GSM8K}/train_socratic.jsonl"),
            DataFile("test_socratic", "test_socratic.jsonl", f"{_GSM8K}/test_socratic.jsonl"),
        ),
        homepage="https://github.com/openai/grade-school-math",
        license="MIT",
        hub=("openai/gsm8k", "main"),
        notes="7,473 train and 1,319 test problems (Cobbe et al., 2021).",
    )
)
register_dataset(
    DatasetInfo(
        name="svamp",
        files=(
            DataFile(
                "test", "SVAMP.json", "https://raw.githubusercontent.com/arkilpatel/SVAMP/main/SVAMP.json"
            ),
        ),
        homepage="https://github.com/arkilpatel/SVAMP",
        license="MIT",
        notes="1,000 problems (Patel et al., 2021); the Lumos paper evaluates on all of them.",
    )
)
register_dataset(
    DatasetInfo(
        name="asdiv",
        files=(
            DataFile(
                "test",
                "ASDiv.xml",
                "https://raw.githubusercontent.com/chaochun/nlu-asdiv-dataset/master/dataset/ASDiv.xml",
            ),
        ),
        homepage="https://github.com/chaochun/nlu-asdiv-dataset",
        license="CC BY-NC 4.0",
        notes="2,305 problems (Miao et al., 2020); Lumos trains on them.",
    )
)


def cache_root() -> Path:
    """Return the lumos-gym cache folder (``$LUMOS_GYM_CACHE`` or ``~/.cache/lumos-gym``)."""
    return Path(os.environ.get("LUMOS_GYM_CACHE", "~/.cache/lumos-gym")).expanduser()


def dataset_dir(name: str) -> Path:
    """Return the cache folder of dataset ``name``."""
    return cache_root() / "data" / DATASETS.get(name).name


def dataset_path(name: str, split: str) -> Path:
    """Return where the official file of ``name``/``split`` lives in the cache."""
    return dataset_dir(name) / DATASETS.get(name).file(split).filename


def download_hint(name: str, split: str) -> str:
    """Return the one-line instruction that gets a missing official file."""
    data_file = DATASETS.get(name).file(split)
    return (
        f"run `lumos-gym data download {name}`, or fetch {data_file.url} "
        f"and save it as {dataset_path(name, split)}"
    )


def _read_checksums(folder: Path) -> dict[str, str]:
    path = folder / "checksums.json"
    if not path.is_file():
        return {}
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not a JSON object of file checksums ({e})") from e


def _write_checksums(folder: Path, checksums: dict[str, str]) -> None:
    tmp = folder / "checksums.json.tmp"
    tmp.write_text(json.dumps(checksums, indent=2, sort_keys=True) + "\n")
    tmp.replace(folder / "checksums.json")


def _fetch(url: str, dest: Path, *, timeout: float, progress: Callable[[int], None] | None) -> str:
    """Download ``url`` to ``dest`` atomically and return its SHA-256."""
    digest = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "lumos-gym"})
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, os.fdopen(fd, "wb") as f:
            while block := response.read(1 << 16):
                f.write(block)
                digest.update(block)
                if progress:
                    progress(len(block))
        os.replace(tmp_name, dest)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return digest.hexdigest()


def download(
    name: str,
    *,
    splits: list[str] | None = None,
    force: bool = False,
    timeout: float = 30.0,
    progress: bool = True,
) -> list[Path]:
    """Fetch the official files of dataset ``name`` into the cache.

    Args:
        name: a registered dataset.
        splits: only these splits (default: all).
        force: download again even when the file is present.
        timeout: seconds to wait for the server.
        progress: show a progress bar per file.

    Returns:
        The paths of the files, present and checksum-verified.

    Raises:
        DataError: offline or on a checksum mismatch, naming the URL and the target path.
    """
    info = DATASETS.get(name)
    folder = dataset_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    checksums = _read_checksums(folder)
    paths = []
    for data_file in info.files:
        if splits and data_file.split not in splits:
            continue
        dest = folder / data_file.filename
        expected = data_file.sha256 or checksums.get(data_file.filename)
        if dest.is_file() and not force:
            from lumos_gym.envs.sources import file_sha256

            actual = file_sha256(dest)
            if expected and actual != expected:
                raise DataError(
                    f"{dest}: checksum {actual[:12]}... differs from the recorded "
                    f"{expected[:12]}...; delete it or pass --force"
                )
            checksums[data_file.filename] = actual
            paths.append(dest)
            continue
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(desc=data_file.filename, unit="B", unit_scale=True, leave=False)
        try:
            update = bar.update if bar is not None else None
            actual = _fetch(data_file.url, dest, timeout=timeout, progress=update)
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            raise DataError(
                f"cannot download {data_file.url} ({e}); to install it by hand, fetch that URL "
                f"and save it as {dest}"
            ) from e
        finally:
            if bar is not None:
                bar.close()
        if data_file.sha256 and actual != data_file.sha256:
            dest.unlink()
            raise DataError(f"{data_file.url}: checksum mismatch (got {actual[:12]}...)")
        checksums[data_file.filename] = actual
        paths.append(dest)
    _write_checksums(folder, checksums)
    return paths


def status(name: str) -> list[tuple[DataFile, Path, bool]]:
    """Return each official file of ``name`` with its cache path and whether it is present."""
    info = DATASETS.get(name)
    folder = dataset_dir(name)
    return [(f, folder / f.filename, (folder / f.filename).is_file()) for f in info.files]


def copy_into_cache(name: str, split: str, source: str | Path) -> Path:
    """Copy a file obtained by hand into the cache as the official file of ``split``."""
    dest = dataset_path(name, split)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    return dest
