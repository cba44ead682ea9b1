"""The multimodal family: tasks about an image, answered with ``VQA``, ``QA`` and ``Calculator``.

:class:`MultimodalEnv` is the shared base. Its observations are Gymnasium ``Dict`` spaces,
``{"text": ..., "image": uint8 array (H, W, 3)}``: the text is what a text env would show, the
image the task's picture letterboxed to a fixed ``observation_size`` (black bars; black when
the task has no image or its file cannot be read). Each episode keeps the task's image, loaded
once on ``reset``, in a :class:`TaskImage` session, which the ``VQA`` tool reads at full
resolution through ``ToolContext.session``. A missing or unreadable image file never stops an
episode: ``VQA`` answers it with an ``Error:`` observation. Episodes end with ``Answer(...)``.

Tools, in the order of the grounding instruction (:data:`VQA_TOOLS`): ``VQA(<img>, query)``,
Lumos' ``QA(context, query)`` and ``Calculator(formula)`` (docs/lumos-format.md §2.5: A-OKVQA plans
ask ``VQA`` about the image, then ``QA`` with world knowledge).

:class:`VQADatasetEnv` plays the official A-OKVQA and ScienceQA files
(:mod:`lumos_gym.envs.multimodal.data`) with images from a local folder. The question shown
lists the options as ``(A) ... (B) ...``; an answer is matched to an option by its text, its
letter or its index (:func:`choice_index`). Metrics: A-OKVQA ``mc_accuracy`` (primary; the
chosen option is the correct one), ``da_accuracy`` (the official direct-answer score,
``min(#annotators who gave the answer / 3, 1)``, ``evaluation/eval_predictions.py`` of
allenai/aokvqa, on normalised strings) and ``accuracy`` (= ``mc_accuracy``); ScienceQA
``accuracy`` (the chosen option index equals ``answer``, as ``tools/evaluate_acc.py`` of
lupantech/ScienceQA counts it).
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from lumos_gym.envs.base import EpisodeSession, EpisodeState, LumosEnv
from lumos_gym.envs.multimodal import data
from lumos_gym.envs.sources import FileSource, TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError, LumosGymError, ToolError
from lumos_gym.scoring.answers import answers_match
from lumos_gym.scoring.qa import normalize_answer

try:
    from PIL import Image, UnidentifiedImageError
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the multimodal envs need Pillow; install it with: pip install 'lumos-gym[vision]'"
    ) from e

__all__ = [
    "DEFAULT_OBSERVATION_SIZE",
    "MULTIMODAL_DATASETS",
    "VQA_TOOLS",
    "MultimodalEnv",
    "TaskImage",
    "VQADatasetEnv",
    "aokvqa_scores",
    "choice_index",
    "letterbox",
    "open_image",
    "scienceqa_scores",
    "vqa_tool_options",
]

#: The tools of the multimodal envs, in the order of their grounding instruction.
VQA_TOOLS = ("VQA", "QA", "Calculator")
#: Height and width of the image in observations (the tools see the original image).
DEFAULT_OBSERVATION_SIZE = (256, 256)
MULTIMODAL_DATASETS = ("aokvqa", "scienceqa")


def vqa_tool_options(
    *,
    vqa_backend: str = "hf",
    vqa_model: str | None = None,
    vqa_options: Mapping[str, Any] | None = None,
    qa_backend: str = "model",
    qa_model: Any = None,
    qa_evidence: bool = True,
    names: Sequence[str] = VQA_TOOLS,
) -> dict[str, dict[str, Any]]:
    """Return the backend options of the multimodal tools, by tool name.

    Args:
        vqa_backend: the ``VQA`` backend (``"hf"``, ``"scene"`` or ``"reference"``).
        vqa_model: for ``hf``, the model (hub id or folder).
        vqa_options: more ``VQA`` options (``max_new_tokens``, ``device``, ``dtype``...).
        qa_backend: the ``QA`` backend (``"model"`` or ``"reference"``).
        qa_model: the ``QA`` tool's model spec or backend; its default when None.
        qa_evidence: for the reference ``QA`` backend, require span answers to occur in the
            context (False where ``QA`` draws on world knowledge, as in A-OKVQA).
        names: the tools to return options for, in order.
    """
    vqa: dict[str, Any] = {"backend": vqa_backend, **dict(vqa_options or {})}
    if vqa_model is not None:
        vqa["model"] = vqa_model
    qa: dict[str, Any] = {"backend": qa_backend, "require_evidence": qa_evidence}
    if qa_model is not None:
        qa["model"] = qa_model
    options = {"VQA": vqa, "QA": qa}
    return {name: dict(options.get(name, {})) for name in names}


# ---------------------------------------------------------------------------------------------
# Images


def open_image(path: str | Path) -> Image.Image:
    """Read an image file as RGB (transparent parts over white).

    Raises:
        DataError: no such file, not an image Pillow can read, or a damaged file.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"the image file {path} does not exist")
    try:
        with Image.open(path) as raw:
            raw.load()
            image = _to_rgb(raw)
    except UnidentifiedImageError as e:
        raise DataError(f"{path} is not an image file that Pillow can read") from e
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise DataError(f"cannot read the image {path}: {e}") from e
    return image


def _to_rgb(image: Image.Image) -> Image.Image:
    if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def letterbox(image: Image.Image, size: tuple[int, int]) -> np.ndarray:
    """Scale ``image`` to fit ``size`` = (height, width), keeping its shape, on black bars.

    Returns:
        A ``uint8`` array of shape ``(height, width, 3)``.
    """
    height, width = size
    scale = min(width / image.width, height / image.height)
    new_w, new_h = max(1, round(image.width * scale)), max(1, round(image.height * scale))
    if (new_w, new_h) != image.size:
        image = image.resize((new_w, new_h), Image.Resampling.BILINEAR)
    canvas = np.zeros((height, width, 3), np.uint8)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    canvas[top : top + new_h, left : left + new_w] = np.asarray(image.convert("RGB"))
    return canvas


class TaskImage(EpisodeSession):
    """The image of one episode: what the ``VQA`` tool asks about, and the observed picture.

    Args:
        image: the image (RGB), or None.
        size: the observation size, (height, width).
        declared: whether the task has an image (True even when it could not be read).
        error: why the declared image could not be read.
        reader: what reads the env's own generated pictures without a model (the ``VQA``
            tool's ``scene`` backend), or None.
    """

    def __init__(
        self,
        image: Image.Image | None,
        *,
        size: tuple[int, int],
        declared: bool | None = None,
        error: str | None = None,
        reader: Any = None,
    ) -> None:
        self._image = image
        self.reader = reader
        self.size = size
        self.declared = image is not None if declared is None else declared
        self.error = error
        self._observation: np.ndarray | None = None

    @classmethod
    def open(
        cls, load: Callable[[], Image.Image | None], *, size: tuple[int, int], reader: Any = None
    ) -> TaskImage:
        """Load the image with ``load`` (None: the task has none); a failure is kept, not raised."""
        try:
            image = load()
        except (DataError, OSError, ValueError, Image.DecompressionBombError) as e:
            return cls(None, size=size, declared=True, error=str(e), reader=reader)
        return cls(image, size=size, reader=reader)

    @property
    def has_image(self) -> bool:
        """Whether the task has an image (readable or not)."""
        return self.declared

    def image(self) -> Image.Image:
        """Return the image at full resolution.

        Raises:
            ToolError: the task has no image, or its file is missing or unreadable.
        """
        if self._image is None:
            if self.error:
                raise ToolError(f"the task's image cannot be used: {self.error}")
            raise ToolError("this task has no image")
        return self._image

    def observation(self) -> np.ndarray:
        """Return the letterboxed image (black without an image), read-only: copy it to hand out."""
        if self._observation is None:
            if self._image is None:
                array = np.zeros((*self.size, 3), np.uint8)
            else:
                array = letterbox(self._image, self.size)
            array.flags.writeable = False
            self._observation = array
        return self._observation

    def close(self) -> None:
        """Drop the image. Idempotent."""
        self._image = None


# ---------------------------------------------------------------------------------------------
# Scoring

_LETTER = re.compile(r"\(?([A-Za-z])\)?[.):]?(?:\s+.*)?", re.DOTALL)
_ANSWER_IS = re.compile(r"\banswer is:?\s*\(?([A-Z])\)?(?![A-Za-z])")


def choice_index(prediction: str, choices: Sequence[str]) -> int | None:
    """Return the index of the option that ``prediction`` names, or None.

    In order: the option's text (normalised: case, punctuation and articles ignored); its
    letter (``B``, ``(B)``, ``B.``, ``(B) text``, ``The answer is B.``); its 0-based index
    (``1``), as ScienceQA's ``answer`` field counts, only when no option is itself a number.
    """
    text = prediction.strip()
    normalised = normalize_answer(text)
    options = [normalize_answer(c) for c in choices]
    if normalised and normalised in options:
        return options.index(normalised)
    letter = _LETTER.fullmatch(text) or _ANSWER_IS.search(text)
    if letter is not None:
        index = ord(letter.group(1).upper()) - ord("A")
        if 0 <= index < len(choices):
            return index
    if text.isdigit() and not any(o.isdigit() for o in options) and int(text) < len(choices):
        return int(text)
    return None


def aokvqa_scores(prediction: str, task: Task) -> dict[str, float]:
    """Return A-OKVQA's ``mc_accuracy``, ``da_accuracy`` and ``accuracy`` (= ``mc_accuracy``).

    The direct answer is the chosen option's text when the prediction names an option, else
    the prediction itself; it scores ``min(matching direct answers / 3, 1)``.
    """
    choices = list(task.meta.get("choices") or ())
    index = choice_index(prediction, choices)
    correct = task.meta.get("correct_choice_idx")
    mc = float(index is not None and index == correct)
    answer = normalize_answer(choices[index] if index is not None else prediction)
    matches = sum(1 for d in task.meta.get("direct_answers") or () if normalize_answer(d) == answer)
    da = min(1.0, matches / 3.0) if answer else 0.0
    return {"mc_accuracy": mc, "da_accuracy": da, "accuracy": mc}


def scienceqa_scores(prediction: str, task: Task) -> dict[str, float]:
    """Return ScienceQA's ``accuracy``: the named option is the ``answer`` index."""
    index = choice_index(prediction, list(task.meta.get("choices") or ()))
    return {"accuracy": float(index is not None and index == task.meta.get("answer"))}


def _exact_scores(prediction: str, task: Task) -> dict[str, float]:
    golds = [task.answer, *(str(a) for a in task.meta.get("aliases") or ())]
    return {"accuracy": float(any(answers_match(prediction, g) for g in golds))}


# ---------------------------------------------------------------------------------------------
# The environments


class MultimodalEnv(LumosEnv):
    """The shared base of the multimodal envs: an image per task, Dict observations.

    Subclasses implement :meth:`load_image`; :meth:`score` defaults to exact match after
    normalisation (numbers compared as numbers), with ``meta["aliases"]``.

    Args:
        tasks: the tasks, or a task source.
        dataset: the dataset name (``env.dataset``, the converter's name).
        vqa_backend: the ``VQA`` backend: ``"hf"``, ``"scene"`` or ``"reference"``.
        vqa_model: for ``hf``, a hub id or local folder of an image-text-to-text model.
        vqa_options: more ``VQA`` options (``max_new_tokens``, ``device``, ``dtype``, ``prompt``).
        qa_backend: the ``QA`` backend: ``"model"`` or ``"reference"`` (needs privileged).
        qa_model: the ``QA`` tool's model: a spec ``BACKEND:MODEL[@URL]`` or a backend.
        qa_evidence: for the reference ``QA`` backend, require span answers in the context.
        observation_size: (height, width) of the observed image.
        **options: :class:`~lumos_gym.envs.base.LumosEnv` options (``limit``, ``render_mode``,
            ``privileged``, ``tools``). ``tools`` as a list of names keeps those tools with the
            options above; as a mapping of names to options it replaces them.
    """

    task_type = "multimodal"
    default_tools = VQA_TOOLS
    primary_metric = "accuracy"
    #: What reads this env's pictures without a model (the ``VQA`` ``scene`` backend), if any.
    picture_reader: ClassVar[Any] = None
    #: Replays answer ``VQA`` and ``QA`` from the task's gold facts, so they need no model.
    replay_options: ClassVar[dict[str, Any]] = {
        "privileged": True,
        "vqa_backend": "reference",
        "qa_backend": "reference",
    }

    def __init__(
        self,
        *,
        tasks: Sequence[Task] | TaskSource,
        dataset: str,
        vqa_backend: str = "hf",
        vqa_model: str | None = None,
        vqa_options: Mapping[str, Any] | None = None,
        qa_backend: str = "model",
        qa_model: Any = None,
        qa_evidence: bool = True,
        observation_size: Sequence[int] = DEFAULT_OBSERVATION_SIZE,
        **options: Any,
    ) -> None:
        tools = options.pop("tools", None)
        if not isinstance(tools, Mapping):
            tools = vqa_tool_options(
                vqa_backend=vqa_backend, vqa_model=vqa_model, vqa_options=vqa_options,
                qa_backend=qa_backend, qa_model=qa_model, qa_evidence=qa_evidence,
                names=VQA_TOOLS if tools is None else list(tools),
            )
        size = tuple(int(n) for n in observation_size)
        if len(size) != 2 or min(size) < 1:
            raise LumosGymError(f"observation_size must be (height, width), got {observation_size}")
        self.dataset = dataset
        self.observation_size: tuple[int, int] = (size[0], size[1])
        super().__init__(tasks=tasks, tools=tools, **options)
        self.observation_space = spaces.Dict({
            "text": self.observation_space,
            "image": spaces.Box(0, 255, (*self.observation_size, 3), np.uint8),
        })
        self._blank = np.zeros((*self.observation_size, 3), np.uint8)
        self._blank.flags.writeable = False

    @abstractmethod
    def load_image(self, task: Task) -> Image.Image | None:
        """Return the task's image (RGB), or None when the task has none.

        Raises:
            DataError: the image file is missing or unreadable (the episode still runs).
        """

    # ---------------------------------------------------------------------------- the hooks
    def open_session(self, task: Task) -> TaskImage:
        """Load the task's image for the episode (a failure is kept for ``VQA`` to report)."""
        return TaskImage.open(
            lambda: self.load_image(task), size=self.observation_size, reader=self.picture_reader
        )

    def observation_for(self, text: str, episode: EpisodeState) -> dict[str, Any]:
        """Return ``{"text": text, "image": the letterboxed task image}`` (a fresh array)."""
        session = episode.context.session
        image = session.observation() if isinstance(session, TaskImage) else self._blank
        return {"text": text, "image": image.copy()}

    def task_reference(self, task: Task) -> Mapping[str, Any]:
        """Return the gold ``vqa_answers`` and ``sub_answers`` for the reference backends."""
        return {
            "vqa_answers": dict(task.meta.get("vqa_answers") or {}),
            "sub_answers": dict(task.meta.get("sub_answers") or {}),
        }

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Return ``accuracy``: exact match after normalisation, numbers as numbers."""
        return _exact_scores(prediction, task)


_SCORERS: dict[str, Callable[[str, Task], dict[str, float]]] = {
    "aokvqa": aokvqa_scores,
    "scienceqa": scienceqa_scores,
}


class VQADatasetEnv(MultimodalEnv):
    """A-OKVQA or ScienceQA from their official files, images from a local folder.

    Args:
        dataset: ``"aokvqa"`` or ``"scienceqa"``.
        split: A-OKVQA ``train``/``val``/``test`` (``test`` has no answers); ScienceQA any
            key of ``pid_splits.json`` (``train``, ``val``, ``test``, ``minival``...).
        path: A-OKVQA: the folder holding ``aokvqa_v1p0_<split>.json``, or that file;
            ScienceQA: the folder holding ``problems.json`` and ``pid_splits.json``, or
            ``problems.json``. Default: ``$LUMOS_GYM_CACHE/data/<dataset>``.
        source: the same as ``path`` (the name the text envs use); ``"official"`` is the
            default location.
        images: A-OKVQA: the COCO 2017 folder (holding ``train2017/``, ``val2017/``...),
            default ``$LUMOS_GYM_CACHE/data/coco``; ScienceQA: the folder holding
            ``<split>/<pid>/image.png``, default ``images/`` beside ``problems.json``.
        vqa_backend: ``"hf"`` (with ``vqa_model``), or ``"reference"`` for replays.
        **options: :class:`MultimodalEnv` options and :class:`~lumos_gym.envs.base.LumosEnv`
            options.

    Raises:
        DataError: a missing or malformed file (the message names the expected files).
    """

    def __init__(
        self,
        *,
        dataset: str = "aokvqa",
        split: str | None = None,
        path: str | Path | None = None,
        images: str | Path | None = None,
        source: str | Path | None = None,
        **options: Any,
    ) -> None:
        if source not in (None, "official"):  # source=FILE, as the text envs take it
            if path is not None and str(path) != str(source):
                raise LumosGymError(f"give source= or path=, not both ({source!r}, {path!r})")
            path = source

        if dataset not in MULTIMODAL_DATASETS:
            raise LumosGymError(f"dataset must be one of {MULTIMODAL_DATASETS}, got {dataset!r}")
        split = split or data.DEFAULT_SPLITS[dataset]
        tasks = options.pop("tasks", None)
        file, image_dir = data.resolve_paths(dataset, split, path, images)
        if tasks is None:
            loader = data.load_aokvqa if dataset == "aokvqa" else data.load_scienceqa
            tasks = FileSource(file, loader, split=split, hint=data.download_hint(dataset))
        self.split = split
        self.images = image_dir
        self.scorer = f"{dataset}/official"
        options.setdefault("qa_evidence", False)  # QA draws on world knowledge here
        super().__init__(tasks=tasks, dataset=dataset, **options)
        if dataset == "aokvqa":
            self.primary_metric = "mc_accuracy"

    def load_image(self, task: Task) -> Image.Image | None:
        """Open the task's image file under ``images`` (None when the task has no image)."""
        name = task.meta.get("image_file")
        return None if not name else open_image(self.images / str(name))

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Return the dataset's metrics (see the module docstring)."""
        return _SCORERS[self.dataset](prediction, task)
