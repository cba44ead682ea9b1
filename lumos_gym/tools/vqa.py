r"""The ``VQA`` tool: answer a question about the task's image.

``R1 = VQA(<img>, What is the brand of the device?)``, as Lumos grounds visual questions
(docs/lumos-format.md §2.5, executed there by LLaVA). The first argument names the image: the
literal ``<img>`` (also ``<image>``, ``Image`` or ``img``), or a variable holding one of those.
The question is the ``Question:`` (or ``Query:``) argument, or the rest of the positional
arguments; variables in it are substituted. The image is the one the env keeps for the episode
(``ToolContext.session``, any object with a ``has_image`` property and an ``image()`` method,
see :class:`ImageSource`); a task without an image, or whose file is missing or unreadable,
gives an ``Error:`` observation.

Three backends (option ``backend``):

* ``"hf"`` (default): any Hugging Face image-text-to-text model, by hub id or local folder,
  through transformers' ``AutoProcessor`` and ``AutoModelForImageTextToText``; loaded on the
  first question (shared by the tools that name the same model), greedy, at most
  ``max_new_tokens`` new tokens. The question goes into :data:`VQA_PROMPT` (the short-answer
  instruction of LLaVA-1.5's evaluation) inside the processor's chat template, or after the
  processor's image token when it has no template. The value is the first line of the answer.
* ``"scene"``: classical image analysis for the generated pictures of ``lumos/Scenes-v0``,
  done by the picture reader that env puts on its session (``session.reader``, a
  :class:`PictureReader`; :mod:`lumos_gym.envs.multimodal.reader`). It reads the pixels only,
  never the scene records: every pixel is named by its nearest colour (the six object
  colours, the card frame's grey, the ink's black); same-coloured pixels form 8-connected components
  (a run-length union-find); each object component gets a shape from its geometry (the share of its
  bounding box it fills, and where its widest row lies: a triangle is widest at its base, a diamond
  in its middle), a size from its extent, and a grid cell from its centroid. The card's words are
  read by matching each 22 by 12 pixel cell of its ink against the glyphs of the font the renderer
  used (Pillow's bitmap font, magnified twice), trying every alignment of the glyph grid. It answers
  the question forms the Scenes generator asks (counts, colours, shapes, sizes, positions,
  right-hand neighbours, the card) and refuses others with an error naming them.
* ``"reference"``: the gold answers of the task (``ctx.reference["vqa_answers"]``, question →
  answer, given only to privileged envs and replay verifiers), for replays of dataset
  annotations; it needs the task to have an image but never looks at it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from lumos_gym.actions import VARIABLE_PATTERN, Action, substitute
from lumos_gym.errors import ToolError
from lumos_gym.tools.base import SharedResources, Tool, ToolContext, ToolResult, ToolSpec
from lumos_gym.tools.qa import reference_answer

__all__ = [
    "IMAGE_REFERENCES",
    "VQA",
    "VQA_BACKENDS",
    "VQA_PROMPT",
    "ImageSource",
    "PictureReader",
]

VQA_BACKENDS = ("hf", "scene", "reference")
#: The names by which an action refers to the task's image (compared case-insensitively).
IMAGE_REFERENCES = ("<img>", "<image>", "image", "img")
#: The text sent with the image to a vision-language model: LLaVA-1.5's short-answer
#: instruction, so that answers come as a word or phrase.
VQA_PROMPT = "{question}\nAnswer the question using a single word or phrase."
VQA_MAX_NEW_TOKENS = 32

_VARIABLE = re.compile(rf"(?:{VARIABLE_PATTERN})\Z")
_ANSWER_PREFIX = re.compile(r"^\s*(?:answer\s*:\s*)", re.IGNORECASE)


@runtime_checkable
class ImageSource(Protocol):
    """What the ``VQA`` tool needs from an env's episode session."""

    @property
    def has_image(self) -> bool:
        """Whether the task has an image at all (readable or not)."""
        ...

    def image(self) -> Any:
        """Return the task's image as an RGB ``PIL.Image``; raise ToolError when there is none."""
        ...


@runtime_checkable
class PictureReader(Protocol):
    """Reads an env's own generated pictures without a model: the ``scene`` backend.

    An env whose pictures can be read this way puts one on its episode session as
    ``session.reader``; the tool reads each image once and keeps the reading for the episode.
    """

    def read(self, image: Any) -> Any:
        """Read the picture (objects, text...) into a reading the tool keeps."""
        ...

    def answer(self, reading: Any, question: str) -> str:
        """Answer ``question`` from a reading; raise ToolError for a question it cannot read."""
        ...


class VQA(Tool):
    """Answer a question about the task's image (Lumos' ``VQA`` action).

    Args:
        backend: ``"hf"`` (a vision-language model), ``"scene"`` (image analysis of generated
            scenes) or ``"reference"`` (gold answers, for replays).
        model: for ``hf``, a hub id or a local folder of an image-text-to-text model.
        max_new_tokens: for ``hf``, the most tokens of one answer.
        prompt: for ``hf``, the text sent with the image; ``{question}`` is replaced.
        device: for ``hf``, the torch device (``"cpu"``, ``"cuda"``...).
        dtype: for ``hf``, the torch dtype name (``"float32"``, ``"bfloat16"``); the model's
            own when None.

    Raises:
        ToolError: an unknown backend (``hf`` without a model fails on its first question).
    """

    spec = ToolSpec(
        "VQA", "VQA(<img>, query)", "Given the task's image <img>, answer the given query about it"
    )

    def __init__(
        self,
        *,
        backend: str = "hf",
        model: str | None = None,
        max_new_tokens: int = VQA_MAX_NEW_TOKENS,
        prompt: str = VQA_PROMPT,
        device: str = "cpu",
        dtype: str | None = None,
    ) -> None:
        if backend not in VQA_BACKENDS:
            known = ", ".join(VQA_BACKENDS)
            raise ToolError(f"VQA backend must be one of {known}; got {backend!r}")
        if max_new_tokens < 1:
            raise ToolError("VQA max_new_tokens must be at least 1")
        if "{question}" not in prompt:
            raise ToolError("the VQA prompt must hold '{question}'")
        self.backend = backend
        self.model = model
        self.max_new_tokens = max_new_tokens
        self.prompt = prompt
        self.device = device
        self.dtype = dtype
        self._vision: _VisionModel | None = None
        self._lock = threading.Lock()

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Answer the question of ``action`` about the episode's image.

        Raises:
            ToolError: a first argument that names no image, no question, a task without a
                (readable) image, a question the backend cannot answer, or a failing model.
            UndefinedVariableError: for an unbound ``R<n>``.
        """
        raw_question = self._check_arguments(action, ctx)
        question = substitute(raw_question, ctx.variables).strip()
        source = ctx.session
        if not isinstance(source, ImageSource):
            raise ToolError("this environment shows no image to ask about")
        if not source.has_image:
            raise ToolError("this task has no image; answer from the text (e.g. with QA)")
        if self.backend == "reference":
            answer = self._from_reference(raw_question, question, ctx)
        elif self.backend == "scene":
            answer = self._read_picture(source, question, ctx)
        else:
            image = source.image()  # an unusable image is reported before any model loads
            answer = self._vision_model().answer(image, question, self)
        ctx.state.setdefault("VQA", []).append(
            {"backend": self.backend, "question": question, "answer": answer}
        )
        return ToolResult((answer,))

    def close(self) -> None:
        """Release the vision model if this tool loaded it. Idempotent."""
        with self._lock:
            if self._vision is not None:
                _SHARED_MODELS.release(self._vision_key())
                self._vision = None

    # -------------------------------------------------------------------------- arguments
    @staticmethod
    def _check_arguments(action: Action, ctx: ToolContext) -> str:
        """Check the image argument and return the question (not yet substituted)."""
        args = action.arguments()
        positional = list(args.positional)
        if not positional:
            raise ToolError("VQA needs the image and a question, e.g. VQA(<img>, What is it?)")
        reference = positional.pop(0).strip()
        if _VARIABLE.match(reference):
            reference = substitute(reference, ctx.variables).strip()
        if reference.lower() not in IMAGE_REFERENCES:
            raise ToolError(
                f"VQA's first argument must name the task's image as <img>, got {reference!r}"
            )
        question = args.get("Question") or args.get("Query")
        if question is None:
            question = ", ".join(positional)
        if not question.strip():
            raise ToolError("VQA needs a question, e.g. VQA(<img>, What colour is the car?)")
        return question.strip()

    # --------------------------------------------------------------------------- backends
    @staticmethod
    def _from_reference(raw_question: str, question: str, ctx: ToolContext) -> str:
        answers = ctx.reference.get("vqa_answers")
        if not isinstance(answers, Mapping):
            raise ToolError(
                "the VQA reference backend answers from the task's gold answers, which only a "
                "privileged env (privileged=True) or a verifier provides"
            )
        answer = reference_answer(answers, raw_question, question)
        if answer is None:
            raise ToolError(f"the reference holds no answer to {question!r}")
        return answer

    @staticmethod
    def _read_picture(source: ImageSource, question: str, ctx: ToolContext) -> str:
        """Answer with the env's picture reader, reading the image once per episode."""
        image = source.image()  # an unusable image is reported first
        reader = getattr(source, "reader", None)
        if not isinstance(reader, PictureReader):
            raise ToolError(
                "the VQA 'scene' backend reads generated pictures (lumos/Scenes-v0); this "
                "env's images come with no picture reader: use the 'hf' backend"
            )
        cache = ctx.state.setdefault("VQA:scene", {})
        if cache.get("image") is not image:
            cache["image"], cache["reading"] = image, reader.read(image)
        return reader.answer(cache["reading"], question)

    def _vision_key(self) -> tuple[str, str, str | None]:
        return str(self.model), self.device, self.dtype

    def _vision_model(self) -> _VisionModel:
        if not self.model:
            raise ToolError(
                "the VQA 'hf' backend needs a model: a hub id or a local folder of an "
                "image-text-to-text model, e.g. tools={'VQA': {'backend': 'hf', 'model': ...}} "
                "or the env option vqa_model=..."
            )
        with self._lock:
            if self._vision is None:
                self._vision = _SHARED_MODELS.acquire(self._vision_key())
            return self._vision


# ---------------------------------------------------------------------------------------------
# The hf backend


class _VisionModel:
    """An image-text-to-text model and its processor, loaded from a hub id or a folder."""

    def __init__(self, model: str, device: str, dtype: str | None) -> None:
        try:
            import torch
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ImportError as e:
            raise ToolError(
                "the VQA 'hf' backend needs torch and transformers: pip install 'lumos-gym[hf]'"
            ) from e
        if model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().is_dir():
            raise ToolError(f"cannot load the VQA model {model!r}: no such folder")
        kwargs: dict[str, Any] = {}
        if dtype is not None:
            if not isinstance(getattr(torch, dtype, None), torch.dtype):
                raise ToolError(f"unknown torch dtype {dtype!r}")
            kwargs["dtype"] = getattr(torch, dtype)
        try:
            self.processor = AutoProcessor.from_pretrained(model)
            self.model = AutoModelForImageTextToText.from_pretrained(model, **kwargs)
            self.model.to(device).eval()
        except (OSError, ValueError, KeyError, ImportError, RuntimeError) as e:
            raise ToolError(f"cannot load the VQA model {model!r}: {type(e).__name__}: {e}") from e
        self.torch = torch
        self.device = device
        self.lock = threading.Lock()

    def prompt_text(self, text: str) -> str:
        """Return the model input for ``text``: its chat template, or image token + text."""
        if getattr(self.processor, "chat_template", None):
            messages = [{"role": "user", "content": [{"type": "image"},
                                                     {"type": "text", "text": text}]}]
            return self.processor.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            )
        token = getattr(self.processor, "image_token", None) or "<image>"
        return f"{token}\n{text}"

    def answer(self, image: Any, question: str, tool: VQA) -> str:
        """Generate the answer to ``question`` about ``image`` (greedy)."""
        text = self.prompt_text(tool.prompt.replace("{question}", question))
        try:
            with self.lock, self.torch.inference_mode():
                inputs = self.processor(images=[image], text=[text], return_tensors="pt")
                inputs = inputs.to(self.device)
                dtype = self.model.dtype
                for key, value in inputs.items():
                    if value.is_floating_point():
                        inputs[key] = value.to(dtype)
                out = self.model.generate(**inputs, max_new_tokens=tool.max_new_tokens,
                                          do_sample=False)
            new = out[:, inputs["input_ids"].shape[1] :]
            decoded = self.processor.batch_decode(new, skip_special_tokens=True)[0]
        except (ValueError, RuntimeError, TypeError, IndexError) as e:
            raise ToolError(f"the VQA model failed: {type(e).__name__}: {e}") from e
        return _first_answer_line(decoded)


def _first_answer_line(text: str) -> str:
    for line in text.splitlines():
        line = _ANSWER_PREFIX.sub("", line).strip().removesuffix(".").strip()
        if line:
            return line
    return ""


#: Vision models shared by every VQA tool that names the same model, device and dtype.
_SHARED_MODELS: SharedResources[tuple[str, str, str | None], _VisionModel] = SharedResources(
    lambda key: _VisionModel(*key)
)
