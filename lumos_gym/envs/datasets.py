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

from lumos_gym.envs.sources import file_sha256
from lumos_gym.errors import DataError
from lumos_gym.jsonl import cache_root
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


# ---------------------------------------------------------------------------------------------
# Complex QA (loaders in lumos_gym/envs/qa/data/). Where the authors ship a zip archive, the
# archive is the cached file and the loaders read the split's member from it.

_HOTPOT = "http://curtis.ml.cmu.edu/datasets/hotpot"
_LUMOS_EVAL = "https://raw.githubusercontent.com/allenai/lumos/main/data/eval"
register_dataset(
    DatasetInfo(
        name="hotpotqa",
        files=(
            DataFile("train", "hotpot_train_v1.1.json", f"{_HOTPOT}/hotpot_train_v1.1.json"),
            *(
                DataFile(split, f"hotpot_{name}_v1.json", f"{_HOTPOT}/hotpot_{name}_v1.json")
                for split, name in (
                    ("dev", "dev_distractor"),
                    ("dev_fullwiki", "dev_fullwiki"),
                    ("test_fullwiki", "test_fullwiki"),
                )
            ),
            DataFile("lumos_eval", "lumos_hotpotqa_test.json", f"{_LUMOS_EVAL}/hotpotqa/test.json"),
        ),
        homepage="https://hotpotqa.github.io",
        license="CC BY-SA 4.0",
        hub=("hotpotqa/hotpot_qa", "distractor"),
        notes=(
            "90,447 train and 7,405 dev questions (Yang et al., 2018); test_fullwiki has no "
            "answers (load it with unlabeled=True); lumos_eval is the Lumos evaluation file "
            "(dev distractor questions with question/answer/type only)."
        ),
    )
)
_STRATEGYQA_ZIP = "https://storage.googleapis.com/ai2i/strategyqa/data/strategyqa_dataset.zip"
register_dataset(
    DatasetInfo(
        name="strategyqa",
        files=(
            DataFile("train", "strategyqa_dataset.zip", _STRATEGYQA_ZIP),
            DataFile("train_filtered", "strategyqa_dataset.zip", _STRATEGYQA_ZIP),
            DataFile("test", "strategyqa_dataset.zip", _STRATEGYQA_ZIP),
            DataFile(
                "lumos_eval", "lumos_strategyqa_test.json", f"{_LUMOS_EVAL}/strategyqa/test.json"
            ),
            DataFile(
                "bigbench",
                "bigbench_strategyqa_task.json",
                "https://raw.githubusercontent.com/google/BIG-bench/main/bigbench/benchmark_tasks/"
                "strategyqa/task.json",
            ),
        ),
        homepage="https://allenai.org/data/strategyqa",
        license="MIT",
        notes=(
            "2,290 train and 490 test questions (Geva et al., 2021); the zip also holds the "
            "evidence paragraphs, used as documents; test has no answers (unlabeled=True)."
        ),
    )
)
_MUSIQUE_ZIP = "https://drive.google.com/uc?export=download&id=1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h"
register_dataset(
    DatasetInfo(
        name="musique",
        files=tuple(
            DataFile(f"{kind}_{part}", "musique_v1.0.zip", _MUSIQUE_ZIP)
            for kind in ("ans", "full")
            for part in ("train", "dev", "test")
        ),
        homepage="https://github.com/StonyBrookNLP/musique",
        license="CC BY 4.0",
        notes=(
            "MuSiQue-Ans and MuSiQue-Full v1.0 (Trivedi et al., 2022); Google Drive may answer "
            "a direct download with a confirmation page: fetch the zip in a browser if so; "
            "the test files have no answers (unlabeled=True)."
        ),
    )
)
register_dataset(
    DatasetInfo(
        name="2wikimultihopqa",
        files=(
            *(
                DataFile(part, "2wikimultihopqa_data.zip",
                         "https://www.dropbox.com/s/npidmtadreo6df2/data.zip?dl=1")
                for part in ("train", "dev", "test")
            ),
            *(
                DataFile(f"ids_{part}", "2wikimultihopqa_data_ids.zip",
                         "https://www.dropbox.com/s/ms2m13252h6xubs/data_ids_april7.zip?dl=1")
                for part in ("train", "dev", "test")
            ),
        ),
        homepage="https://github.com/Alab-NII/2wikimultihop",
        license="Apache-2.0",
        notes=(
            "Ho et al., 2020; ids_* is the April 2021 release with evidences_id and answer_id; "
            "test has no answers (unlabeled=True)."
        ),
    )
)
register_dataset(
    DatasetInfo(
        name="bamboogle",
        files=(
            DataFile(
                "test",
                "bamboogle.csv",
                "https://docs.google.com/spreadsheets/d/1jwcsA5kE4TObr9YHn9Gc-wQHYjTbLhDGx6tmIzMhl_U"
                "/export?format=csv",
            ),
        ),
        homepage="https://github.com/ofirpress/self-ask",
        license="MIT",
        hub=("chiayewken/bamboogle", None),
        notes="125 two-hop questions (Press et al., 2022), without documents.",
    )
)

# MBPP's two official files; both hold every split, told apart by task id (test 11-510, train
# 601-974, validation 511-600, prompt 1-10): the DataFile "split" names the file here.
_MBPP = "https://raw.githubusercontent.com/google-research/google-research/master/mbpp"
register_dataset(
    DatasetInfo(
        name="mbpp",
        files=(
            DataFile("full", "mbpp.jsonl", f"{_MBPP}/mbpp.jsonl"),
            DataFile("sanitized", "sanitized-mbpp.json", f"{_MBPP}/sanitized-mbpp.json"),
        ),
        homepage="https://github.com/google-research/google-research/tree/master/mbpp",
        license="CC BY 4.0",
        hub=("google-research-datasets/mbpp", "full"),
        notes="974 problems (Austin et al., 2021), 427 in the hand-verified sanitized file.",
    )
)
