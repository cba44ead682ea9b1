r"""The ``QA`` tool: answer a question from the context that earlier actions retrieved.

``R3 = QA([R2], Question: How many kids did Julius Caesar have?)`` or, with several contexts,
``QA([R2, R5], Question: ...)``. The first argument is a bracketed list (or a single item) of
variables, whose values are substituted, or literal text; the items are joined by newlines.
The question is the ``Question:`` (or ``Query:``) argument, or the second positional one;
variables in it are substituted too. The value is the answer text alone (``1206``, ``yes``,
``Mongolia``), or ``No answer``.

Two backends (option ``backend``):

* ``"model"`` (default): a language model, as Lumos used gpt-3.5-turbo (``eval/hotpotqa/
  qa_tool.py``). The prompt is Lumos' QA prompt byte for byte (:data:`QA_PROMPT`), greedy, at
  most 100 new tokens, stopping at the first newline. ``Answer: X`` gives ``X``; an output that
  says ``No answer`` (or is empty) is retried once without the context
  (:data:`QA_NO_CONTEXT_PROMPT`), or, when the question contains ``Must answer yes/no``, with
  the prompt that forces an answer (:data:`QA_FORCED_PROMPT`). Any other output is read as the
  answer itself (its first line). Every raw completion is appended to ``ctx.state["QA"]``.
  The default model is :func:`default_qa_model`: SmolLM2-135M with the shipped reference QA
  adapter when the package holds one, the untrained model otherwise. A model spec naming a
  LoRA output folder (``hf:path/to/adapter``, ``openvino:path/to/adapter``) loads the
  adapter's base with it and, unless ``chat`` is given, sends the raw prompt in Lumos'
  framing, the bytes ``lumos-gym train`` trained it on.
* ``"reference"``: the gold sub-answers of the task (``ctx.reference["sub_answers"]``, filled
  only in privileged envs and verifiers), looked up by the normalised question. With
  ``require_evidence=True`` a span answer must occur in the context, so that replaying a gold
  decomposition checks that retrieval found the evidence.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lumos_gym.actions import Action, split_list, substitute
from lumos_gym.errors import LumosGymError, ToolError
from lumos_gym.models.base import Backend, Completion, GenerationRequest
from lumos_gym.models.factory import ADAPTER_BACKENDS, backend_from_spec, default_backend
from lumos_gym.models.reference import REFERENCE_ROOT
from lumos_gym.models.sources import adapter_folder_base
from lumos_gym.prompts import render_inference
from lumos_gym.scoring.answers import to_fraction
from lumos_gym.scoring.qa import NO_ANSWER, normalize_answer
from lumos_gym.tools.base import SharedResources, Tool, ToolContext, ToolResult, ToolSpec

__all__ = [
    "DEFAULT_QA_MODEL",
    "MUST_ANSWER_YES_NO",
    "QA",
    "QA_BACKENDS",
    "QA_FORCED_PROMPT",
    "QA_MAX_NEW_TOKENS",
    "QA_NO_CONTEXT_PROMPT",
    "QA_PROMPT",
    "QA_REFERENCE_ADAPTER",
    "QA_REFERENCE_ENV",
    "QA_STOP",
    "QAInputs",
    "default_qa_model",
    "parse_qa_output",
    "question_key",
    "read_qa_inputs",
    "reference_answer",
]

# The three prompts of Lumos' QA tool (eval/hotpotqa/qa_tool.py, QAActions.QA), byte for
# byte: each is one user message and ends with a newline. Filled with str.format.
QA_PROMPT = (
    "Please answer the following question according to the context. Please answer with one "
    "brief entity, beginning with 'Answer: '. If the answer can't be found in the context, "
    "answer 'No answer'. No more details and explanations.\n\n"
    "Question: {question}\nContext: {context}\n"
)
QA_NO_CONTEXT_PROMPT = (
    "Please answer the following question. Please answer with one brief entity, beginning "
    "with 'Answer: '. If the answer can't be answered, output 'No answer'. No more details and "
    "explanations.\n\nQuestion: {question}\n"
)
QA_FORCED_PROMPT = (
    "Please answer the following question. Please answer with one brief entity, beginning "
    "with 'Answer: '.\n\nQuestion: {question}\n"
)
#: The marker by which Lumos' questions ask for a forced yes/no answer in the retry.
MUST_ANSWER_YES_NO = "Must answer yes/no"
#: Lumos asked the QA model for at most 100 tokens.
QA_MAX_NEW_TOKENS = 100
#: An answer is one line; small models such as SmolLM2 also write ``</s>`` as plain text.
QA_STOP = ("\n", "</s>")
#: The untrained offline default model behind the ``model`` backend.
DEFAULT_QA_MODEL = "hf:smollm2-135m"
#: The folder of the shipped reference QA adapter (a LoRA adapter of SmolLM2-135M trained on
#: ``train/qa-tool.jsonl``, see :mod:`lumos_gym.conversion.qa_tool`); absent until one ships.
QA_REFERENCE_ADAPTER = REFERENCE_ROOT / "qa-smollm2-135m"
#: Set this environment variable to ``0`` (or ``false``, ``no``, ``off``) to make the
#: untrained :data:`DEFAULT_QA_MODEL` the default even when the reference adapter ships.
QA_REFERENCE_ENV = "LUMOS_GYM_QA_REFERENCE"
QA_BACKENDS = ("model", "reference")

_ANSWER_RE = re.compile(r"Answer:\s*(.*)", re.IGNORECASE)
_NO_ANSWER_RE = re.compile(r"\bno answer\b", re.IGNORECASE)


def parse_qa_output(text: str) -> str | None:
    """Read the answer out of a QA model's output.

    ``Answer: X`` gives ``X`` stripped of spaces and of a final ``.``; an output that says
    ``No answer`` anywhere gives ``None``, as does an empty one; any other output gives its
    first non-empty line, stripped.

    Examples:
        >>> parse_qa_output("Answer: Mongolia."), parse_qa_output("Answer: No answer")
        ('Mongolia', None)
        >>> parse_qa_output("  1206 "), parse_qa_output("")
        ('1206', None)
    """
    text = text.replace("</s>", "").strip()
    if not text or _NO_ANSWER_RE.search(text):
        return None
    match = _ANSWER_RE.search(text)
    if match:
        answer = match.group(1).strip().removesuffix(".").strip()
        return answer or None
    return text.splitlines()[0].strip() or None


def default_qa_model(reference: bool | None = None) -> str:
    """Return the model spec the ``QA`` tool uses when none is named.

    That is ``ENGINE:<QA_REFERENCE_ADAPTER>`` (SmolLM2-135M with the shipped reference QA
    adapter) when the folder holds an adapter (``adapter_config.json``) and the reference is
    wanted, and :data:`DEFAULT_QA_MODEL` (the untrained model) otherwise. ``ENGINE`` is
    ``openvino`` where that is the default backend (:func:`~lumos_gym.models.factory.
    default_backend`: a CPU machine with the ``openvino`` extra), else ``hf``. On the offline
    suite both engines gave every episode the same turns (docs/speed.md); OpenVINO is faster.

    Args:
        reference: whether to use the reference adapter; by default yes, unless the
            environment variable :data:`QA_REFERENCE_ENV` is ``0``/``false``/``no``/``off``.
    """
    if reference is None:
        flag = os.environ.get(QA_REFERENCE_ENV, "").strip().lower()
        reference = flag not in ("0", "false", "no", "off")
    if reference and (QA_REFERENCE_ADAPTER / "adapter_config.json").is_file():
        engine = "openvino" if default_backend() == "openvino" else "hf"
        return f"{engine}:{QA_REFERENCE_ADAPTER}"
    return DEFAULT_QA_MODEL


def question_key(question: str) -> str:
    """Return the lookup key of a question: normalised, then without spaces."""
    return "".join(normalize_answer(question).split())


def reference_answer(answers: Mapping[Any, Any], *questions: str) -> str | None:
    """Return the gold answer a reference table holds for the first of ``questions`` it knows.

    Questions match by :func:`question_key` (case, punctuation and spacing do not matter).
    """
    table = {question_key(str(q)): str(a) for q, a in answers.items()}
    for question in questions:
        answer = table.get(question_key(question))
        if answer is not None:
            return answer
    return None


def _is_span(answer: str) -> bool:
    """Whether an answer must be found in the context: neither yes/no nor a number."""
    if normalize_answer(answer) in ("yes", "no", "true", "false"):
        return False
    return to_fraction(answer) is None


def _occurs(answer: str, context: str) -> bool:
    """Whether the normalised answer occurs as whole words in the normalised context."""
    needle = normalize_answer(answer)
    return bool(needle) and f" {needle} " in f" {normalize_answer(context)} "


@dataclass(frozen=True)
class QAInputs:
    """What one ``QA`` action asks: its question and context, and the prompts they make.

    Attributes:
        raw_question: the question as written in the action (variables not substituted).
        question: the question with its variables substituted, stripped.
        context: the context items, substituted and joined by newlines, stripped.
    """

    raw_question: str
    question: str
    context: str

    @property
    def prompt(self) -> str:
        """The first prompt the model backend sends (:data:`QA_PROMPT`, with the context)."""
        return QA_PROMPT.format(question=self.question, context=self.context)

    @property
    def forced(self) -> bool:
        """Whether the retry forces a yes/no answer (the question holds the marker)."""
        return MUST_ANSWER_YES_NO in self.question

    @property
    def retry_kind(self) -> str:
        """The kind of the retry prompt: ``"forced"`` or ``"no-context"``."""
        return "forced" if self.forced else "no-context"

    @property
    def retry_prompt(self) -> str:
        """The prompt sent when the first answer is ``No answer`` or empty (no context)."""
        template = QA_FORCED_PROMPT if self.forced else QA_NO_CONTEXT_PROMPT
        return template.format(question=self.question)


def read_qa_inputs(action: Action, variables: Mapping[str, str]) -> QAInputs:
    """Read the question and context of a ``QA`` action, substituting ``variables``.

    Raises:
        ToolError: no context or no question.
        UndefinedVariableError: for an unbound ``R<n>`` in the context or question.
    """
    raw_question, items = QA._read_arguments(action)
    context = "\n".join(substitute(item, variables) for item in items).strip()
    question = substitute(raw_question, variables).strip()
    return QAInputs(raw_question, question, context)


def _names_adapter_folder(spec: str) -> bool:
    """Whether a model spec of a backend that applies adapters names a LoRA output folder."""
    backend, _, rest = spec.partition(":")
    if backend not in ADAPTER_BACKENDS:
        return False
    try:
        return adapter_folder_base(rest.partition("@")[0]) is not None
    except LumosGymError:
        return False


def _backend_from_spec(spec: str) -> Backend:
    return backend_from_spec(spec, batch_size=1)


#: Backends built from specs, shared by every QA tool that names the same spec.
_SHARED_MODELS: SharedResources[str, Backend] = SharedResources(
    _backend_from_spec, close=lambda backend: backend.close()
)


class QA(Tool):
    """Answer a question from a context (Lumos' ``QA`` action).

    Args:
        backend: ``"model"`` (a language model) or ``"reference"`` (gold sub-answers).
        model: for the ``model`` backend, a spec ``BACKEND:MODEL[@URL]`` (built on first use by
            :func:`~lumos_gym.models.factory.backend_from_spec`, and closed with the
            tool; ``hf:FOLDER`` may name a LoRA output folder) or a ready
            :class:`~lumos_gym.models.base.Backend` (left open); by default
            :func:`default_qa_model`.
        chat: send the prompt as one chat user message (``True``), as a raw prompt in Lumos'
            ``<|user|>``/``<|assistant|>`` framing (``False``), or decide on first use
            (``None``, the default): the raw prompt for a spec naming a LoRA output folder
            (trained by ``lumos-gym train`` in that framing); otherwise chat, and the raw
            prompt from then on when the backend refuses chat messages (a model without a
            chat template, a completions-only server) and takes the raw prompt.
        require_evidence: for the ``reference`` backend, answer ``No answer`` when a span
            answer does not occur in the context.
        max_new_tokens: the generation budget of one model call.
        seed: recorded with every request.

    Raises:
        ToolError: for an unknown backend or a malformed model spec.
    """

    spec = ToolSpec("QA", "QA(context, query)", "Given context, answer the given query")

    def __init__(
        self,
        *,
        backend: str = "model",
        model: str | Backend | None = None,
        chat: bool | None = None,
        require_evidence: bool = True,
        max_new_tokens: int = QA_MAX_NEW_TOKENS,
        seed: int = 0,
    ) -> None:
        if backend not in QA_BACKENDS:
            known = ", ".join(QA_BACKENDS)
            raise ToolError(f"QA backend must be one of {known}; got {backend!r}")
        model = default_qa_model() if model is None else model
        if isinstance(model, str) and ":" not in model:
            raise ToolError(
                f"QA model must be a spec BACKEND:MODEL[@URL] or a backend; got {model!r}"
            )
        if not isinstance(model, str | Backend):
            raise ToolError(f"QA model must be a spec string or a backend; got {type(model)!r}")
        if max_new_tokens < 1:
            raise ToolError("QA max_new_tokens must be at least 1")
        self.backend = backend
        self.model = model
        self.chat = chat
        self.require_evidence = require_evidence
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self._lm: Backend | None = model if isinstance(model, Backend) else None
        self._owns_lm = False

    # ---------------------------------------------------------------------------- the action
    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Answer the question of ``action`` from its context.

        Raises:
            ToolError: no context or no question, a reference backend without reference
                facts, or a failing model.
            UndefinedVariableError: for an unbound ``R<n>`` in the context or question.
        """
        inputs = read_qa_inputs(action, ctx.variables)
        if self.backend == "reference":
            answer = self._from_reference(inputs.raw_question, inputs.question, inputs.context, ctx)
        else:
            answer = self._from_model(inputs, ctx)
        return ToolResult((answer,))

    def close(self) -> None:
        """Release the model backend if this tool built it from a spec. Idempotent."""
        if self._owns_lm and self._lm is not None:
            _SHARED_MODELS.release(str(self.model))
            self._lm = None
            self._owns_lm = False

    @staticmethod
    def _read_arguments(action: Action) -> tuple[str, list[str]]:
        """Return the question (unsubstituted) and the context items of ``action``."""
        args = action.arguments()
        positional = list(args.positional)
        context_text = args.get("Context")
        if context_text is None:
            if not positional:
                raise ToolError("QA needs a context, e.g. QA([R2], Question: ...)")
            context_text = positional.pop(0)
        items = split_list(context_text)
        if not items:
            raise ToolError("QA got an empty context list; pass e.g. QA([R2], Question: ...)")
        question = args.get("Question")
        if question is None:
            question = args.get("Query")
        if question is None and positional:
            question = ", ".join(positional)
        if question is None or not question.strip():
            raise ToolError("QA needs a question, e.g. QA([R2], Question: Who wrote it?)")
        return question.strip(), items

    # ------------------------------------------------------------------------ the reference
    def _from_reference(
        self, raw_question: str, question: str, context: str, ctx: ToolContext
    ) -> str:
        sub_answers = ctx.reference.get("sub_answers")
        if not isinstance(sub_answers, Mapping):
            raise ToolError(
                "the QA reference backend answers from the task's gold sub-answers, which only a "
                "privileged env (privileged=True) or a verifier provides; use backend='model'"
            )
        answer = reference_answer(sub_answers, raw_question, question)
        verdict = "found"
        if answer is None:
            answer, verdict = NO_ANSWER, "unknown question"
        elif self.require_evidence and _is_span(answer) and not _occurs(answer, context):
            answer, verdict = NO_ANSWER, "answer not in the context"
        self._record(ctx, {"backend": "reference", "question": question, "answer": answer,
                           "verdict": verdict})
        return answer

    # ---------------------------------------------------------------------------- the model
    def _from_model(self, inputs: QAInputs, ctx: ToolContext) -> str:
        answer = parse_qa_output(self._ask(inputs.prompt, "context", ctx))
        if answer is not None:
            return answer
        answer = parse_qa_output(self._ask(inputs.retry_prompt, inputs.retry_kind, ctx))
        return answer if answer is not None else NO_ANSWER

    def _ask(self, prompt: str, kind: str, ctx: ToolContext) -> str:
        """Send one prompt to the model and return its completion text (recorded in ctx)."""
        lm = self._language_model()
        completion = self._generate(lm, prompt, chat=self.chat is not False)
        if completion.stop_reason == "error" and self.chat is None:
            raw = self._generate(lm, prompt, chat=False)
            if raw.stop_reason != "error":
                self.chat = False  # this backend takes raw prompts only: stop trying chat
            completion = raw if raw.stop_reason != "error" else completion
        self._record(ctx, {"backend": "model", "kind": kind, "completion": completion.text,
                           "stop_reason": completion.stop_reason})
        if completion.stop_reason == "error":
            raise ToolError(f"the QA model failed: {completion.error or 'unknown error'}")
        return completion.text

    def _generate(self, lm: Backend, prompt: str, *, chat: bool) -> Completion:
        """Send one request; a backend exception comes back as an error completion."""
        settings: dict[str, Any] = {
            "stop": QA_STOP,
            "max_new_tokens": self.max_new_tokens,
            "temperature": 0.0,
            "seed": self.seed,
        }
        message = {"role": "user", "content": prompt}
        if chat:
            request = GenerationRequest(messages=(message,), **settings)
        else:
            request = GenerationRequest(prompt=render_inference([message]), **settings)
        try:
            (completion,) = lm.generate([request])
        except LumosGymError as e:  # e.g. a completions-only server given chat messages
            return Completion("", "error", error=str(e))
        except Exception as e:  # a backend bug or a dropped connection: report, do not crash
            return Completion("", "error", error=f"{type(e).__name__}: {e}")
        return completion

    def _language_model(self) -> Backend:
        """Return the model backend, building it from the spec on first use.

        Tools given the same spec share one backend (reference-counted, closed with the last
        tool), so that the many env instances of an evaluation load the model once.
        """
        if self._lm is None:
            try:
                self._lm = _SHARED_MODELS.acquire(str(self.model))
            except (LumosGymError, ImportError, OSError, ValueError) as e:
                raise ToolError(f"cannot start the QA model {self.model!r}: {e}") from e
            self._owns_lm = True
            if self.chat is None and _names_adapter_folder(str(self.model)):
                self.chat = False  # trained on Lumos' framing, not the base's chat template
        return self._lm

    @staticmethod
    def _record(ctx: ToolContext, entry: dict[str, Any]) -> None:
        ctx.state.setdefault("QA", []).append(entry)
