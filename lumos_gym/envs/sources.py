"""Task sources: where an environment's tasks come from.

* :class:`FileSource`: a dataset's official file on disk, read by the dataset's loader.
* :class:`BundledSource`: a small file shipped in the package (written by the project).
* :class:`HubSource`: a Hugging Face hub dataset (optional extra ``hub``; only when asked),
  saved once in the official file format and then read like a :class:`FileSource`.
* :class:`GeneratedSource`: a procedural generator with a seed.

Every source can describe itself for provenance, including a checksum of its content.
"""

from __future__ import annotations

import hashlib
import json
import threading
import warnings
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError

#: A loader reads one official file: ``loader(path, split) -> tasks``.
Loader = Callable[[Path, str], list[Task]]


def file_sha256(path: Path) -> str:
    """Return the hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tasks_sha256(tasks: list[Task]) -> str:
    """Return a checksum of task ids, questions and answers (for generated tasks)."""
    digest = hashlib.sha256()
    for task in tasks:
        digest.update(json.dumps([task.id, task.question, task.answer]).encode())
    return digest.hexdigest()


class TaskSource(ABC):
    """Where the tasks of an env come from."""

    @abstractmethod
    def load(self) -> list[Task]:
        """Read or generate the tasks, in a stable order."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Return provenance: the kind of source, its location or parameters, a checksum."""


class FileSource(TaskSource):
    """An official-format file on disk.

    Args:
        path: the file.
        loader: the dataset's loader.
        split: the split name written into task ids.
        hint: how to get the file when it is missing (e.g. the download command).
    """

    kind = "file"

    def __init__(self, path: str | Path, loader: Loader, *, split: str, hint: str = "") -> None:
        self.path = Path(path).expanduser()
        self.loader = loader
        self.split = split
        self.hint = hint

    def load(self) -> list[Task]:
        """Read the file with the loader; a missing file or a folder is a one-line DataError."""
        hint = f"; {self.hint}" if self.hint else ""
        if self.path.is_dir():
            raise DataError(f"{self.path} is a folder; name the data file in it{hint}")
        if not self.path.is_file():
            raise DataError(f"{self.path}: no such file{hint}")
        return self.loader(self.path, self.split)

    def describe(self) -> dict[str, Any]:
        """Return the kind, path, split and the file's SHA-256."""
        sha = file_sha256(self.path) if self.path.is_file() else None
        return {"kind": self.kind, "path": str(self.path), "split": self.split, "sha256": sha}


class BundledSource(FileSource):
    """A file in ``lumos_gym/envs/data`` (small samples the project writes)."""

    kind = "bundled"

    def __init__(
        self, filename: str, loader: Loader, *, split: str, asked: tuple[str, str] | None = None
    ) -> None:
        """Point at ``filename``; ``asked`` is the split the env was given and its default.

        A split other than the default gets a warning: the sample is one small split, and its
        tasks are used whatever the split asked.
        """
        path = Path(str(resources.files("lumos_gym.envs").joinpath("data", filename)))
        super().__init__(path, loader, split=split)
        self.filename = filename
        if asked is not None and asked[0] != asked[1]:
            warnings.warn(
                f"the bundled sample {filename} has no {asked[0]!r} split, so its own tasks are "
                f"used; pass source='official' (lumos-gym data download) for the real split",
                stacklevel=4,
            )

    def describe(self) -> dict[str, Any]:
        """Return the kind, the file name inside the package, the split and the SHA-256."""
        info = super().describe()
        info["path"] = f"lumos_gym/envs/data/{self.filename}"
        return info


class HubSource(TaskSource):
    """A dataset on the Hugging Face hub, saved in its official file format then loaded.

    Needs the optional extra ``hub`` (``pip install lumos-gym[hub]``) and the network, or a
    hub cache that already holds the dataset.

    Args:
        repo_id: the hub dataset, e.g. ``"openai/gsm8k"``.
        split: the hub split, also used in task ids.
        loader: the official-format loader.
        writer: writes the hub rows into a file in the official format.
        cache_path: where that file goes.
        config: the hub config name, if any.
        revision: a hub revision to pin.
    """

    kind = "hub"

    def __init__(
        self,
        repo_id: str,
        *,
        split: str,
        loader: Loader,
        writer: Callable[[list[dict[str, Any]], Path], None],
        cache_path: Path,
        config: str | None = None,
        revision: str | None = None,
    ) -> None:
        self.repo_id = repo_id
        self.split = split
        self.loader = loader
        self.writer = writer
        self.cache_path = cache_path
        self.config = config
        self.revision = revision

    def load(self) -> list[Task]:
        """Fetch the rows once (cached in the official format) and load them."""
        if not self.cache_path.is_file():
            rows = self._fetch_rows()
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_path.with_suffix(self.cache_path.suffix + ".tmp")
            self.writer(rows, tmp)
            tmp.replace(self.cache_path)
        return self.loader(self.cache_path, self.split)

    def _fetch_rows(self) -> list[dict[str, Any]]:
        try:
            import datasets  # optional extra, imported only when a hub source is asked for
        except ImportError as e:
            raise DataError(
                f"hub source {self.repo_id!r} needs the 'datasets' package: "
                "pip install 'lumos-gym[hub]'"
            ) from e
        try:
            data = datasets.load_dataset(
                self.repo_id, self.config, split=self.split, revision=self.revision
            )
        except Exception as e:  # the hub client raises many types; report them in one line
            raise DataError(
                f"cannot load {self.repo_id!r} (config {self.config!r}, split {self.split!r}) "
                f"from the hub: {type(e).__name__}: {e}"
            ) from e
        return [dict(row) for row in data]

    def describe(self) -> dict[str, Any]:
        """Return the repo, config, split, revision and the SHA-256 of the saved file."""
        sha = file_sha256(self.cache_path) if self.cache_path.is_file() else None
        return {
            "kind": self.kind,
            "repo_id": self.repo_id,
            "config": self.config,
            "split": self.split,
            "revision": self.revision,
            "sha256": sha,
        }


class GeneratedSource(TaskSource):
    """Tasks made by a procedural generator.

    Args:
        generate: makes the tasks (deterministic for fixed ``params``).
        params: the generator's parameters (seed, level, count), recorded for provenance.
        share: keep the tasks for the whole process under ``params``, so that the next source
            with equal ``params`` reuses them instead of generating again (the runner builds
            an env for every episode in flight). Only where ``params`` alone fix the tasks.
    """

    kind = "generated"
    #: Task lists of sharing sources, by their params, the most recently used last.
    _shared: OrderedDict[str, tuple[Task, ...]] = OrderedDict()
    _shared_limit = 16
    _lock = threading.Lock()

    def __init__(
        self, generate: Callable[[], list[Task]], params: dict[str, Any], *, share: bool = False
    ) -> None:
        self.generate = generate
        self.params = dict(params)
        self.share = share
        self._tasks: list[Task] | None = None

    def load(self) -> list[Task]:
        """Generate the tasks (once; once a process for equal params with ``share``)."""
        if self._tasks is None:
            self._tasks = self._load_shared() if self.share else self.generate()
        return self._tasks

    def _load_shared(self) -> list[Task]:
        key = json.dumps(self.params, sort_keys=True, default=str)
        cls = GeneratedSource
        with cls._lock:
            if key in cls._shared:
                cls._shared.move_to_end(key)
                return list(cls._shared[key])
        tasks = self.generate()  # outside the lock: generators can take seconds
        with cls._lock:
            cls._shared[key] = tuple(tasks)
            while len(cls._shared) > cls._shared_limit:
                cls._shared.popitem(last=False)
        return list(tasks)

    def describe(self) -> dict[str, Any]:
        """Return the generator's parameters and a checksum of the generated tasks."""
        return {"kind": self.kind, **self.params, "sha256": tasks_sha256(self.load())}
