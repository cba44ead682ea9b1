"""`LumosEnv`: the Gymnasium contract every lumos-gym environment follows.

Observations and actions are text. ``reset`` shows a task; ``step`` parses one or more
``; ``-joined grounded actions, runs them in order through the env's tools, binds their output
variables and returns their results as text. The terminal action ``Answer(<value or R<n>>)``
ends the episode and scores it. Whatever the agent sends, ``step`` returns an observation: a
parse error, a control character, an unknown tool, an undefined variable or a failing tool
becomes an ``Error: ...`` line and a counter in ``info``, never an exception. A tool's own crash (an
exception other than :class:`~lumos_gym.errors.LumosGymError`: a bug, not the agent's input) is
also named in ``info["tool_crash"]`` of its step, so that a runner does not blame the agent.

Web and game envs (``ends_by_answer = False``) end episodes themselves: ``reset`` opens an
:class:`EpisodeSession` (a shop browser session, a game process) that the family's tools act on
through ``ToolContext.session``, and the episode ends when the session says ``done`` (a purchase,
a win or a loss) with the session's metrics. There the terminal action ``Stop()`` gives up and
scores the episode where it stands. Multimodal envs keep a per-episode session too (the task's
image) and return :class:`gymnasium.spaces.Dict` observations through :meth:`observation_for`.
"""

from __future__ import annotations

import numbers
import re
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym

from lumos_gym.actions import Action, parse_actions, substitute
from lumos_gym.envs.sources import TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.envs.text_space import TextSpace
from lumos_gym.envs.text_space import text_charset as text_charset  # kept importable here
from lumos_gym.errors import LumosGymError, ToolError
from lumos_gym.retrieval.documents import Document
from lumos_gym.tools import ToolContext, Toolset, ToolSpec

#: Longest observation kept (characters); longer text is cut with a marker.
MAX_OBSERVATION_CHARS = 200_000
#: Longest action text accepted by the action space (longer actions still get an observation).
MAX_ACTION_CHARS = 8_192
#: Most actions executed from one ``step`` call.
MAX_ACTIONS_PER_STEP = 64
#: The keys ``reset``'s ``options`` may hold (see :meth:`LumosEnv.reset`).
RESET_OPTION_KEYS = frozenset({"task_id", "index", "reference"})

ANSWER_SPEC = ToolSpec("Answer", "Answer(answer)", "Submit the final answer and end the episode")
STOP_SPEC = ToolSpec("Stop", "Stop()", "Give up and end the episode where it stands")
_TRUNCATION_MARK = "\n[... truncated]"


#: Characters outside :func:`text_charset` (kept in step with it).
_OUTSIDE_CHARSET = re.compile("[^\t\n\x20-\x7e\xa0-\ud7ff\ue000-\ufffd]")
#: Characters no action may hold: control characters but tab and line breaks, and lone
#: surrogates. A game engine took ``look\x00`` down; no tool has a use for them.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def normalize_text(text: str, max_chars: int = MAX_OBSERVATION_CHARS) -> str:
    """Map ``text`` into the text space: other characters become ``?``; too long is cut."""
    text = text.replace("\r\n", "\n")
    text = _OUTSIDE_CHARSET.sub("?", text)
    if len(text) > max_chars:
        text = text[: max_chars - len(_TRUNCATION_MARK)] + _TRUNCATION_MARK
    return text


def observation_text(observation: Any) -> str:
    """Return the text of an observation: itself, or the ``"text"`` entry of a Dict one."""
    if isinstance(observation, Mapping):
        return str(observation.get("text", ""))
    return str(observation)


class EpisodeSession:
    """A live per-episode engine (shop session, game process, task image) of an env.

    The env opens one in ``reset`` (:meth:`LumosEnv.open_session`), hands it to its tools as
    ``ToolContext.session`` and closes it when the next episode starts or the env closes. In an
    env whose episodes the environment ends, ``done`` turning true ends the episode with
    :meth:`metrics`. Subclasses override what applies (a task-image session only holds data).
    """

    @property
    def done(self) -> bool:
        """Return True once the engine has ended the episode (a purchase, a win, a loss)."""
        return False

    def metrics(self) -> dict[str, float]:
        """Return every metric of the task type for the episode so far."""
        return {}

    def close(self) -> None:
        """Release the engine (processes, connections). Idempotent."""
        return None  # nothing to release by default


@dataclass
class EpisodeState:
    """What one episode has done so far."""

    task: Task
    context: ToolContext
    steps: int = 0
    actions: int = 0
    invalid_actions: int = 0
    tool_errors: int = 0
    prediction: str | None = None
    done: bool = False
    tool_seconds: float = 0.0
    error_kinds: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, float] | None = None
    #: ``"<tool> failed: <exception>"`` when a tool crashed in the current step.
    tool_crash: str | None = None

    def count_error(self, kind: str) -> None:
        """Count one error of ``kind`` (parse, unknown-tool, undefined-variable, tool...)."""
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
        if kind == "tool":
            self.tool_errors += 1
        else:
            self.invalid_actions += 1


class LumosEnv(gym.Env[str, str], ABC):
    """Base class of the text environments. Subclasses set the class attributes and ``score``.

    Args:
        tasks: the tasks, or a :class:`~lumos_gym.envs.sources.TaskSource` loaded on
            construction.
        tools: tool names (or name → backend options) overriding ``default_tools``.
        render_mode: ``"ansi"`` (``render()`` returns the transcript) or ``"human"`` (prints it).
        limit: keep only the first ``limit`` tasks (in source order).
        privileged: put the task's gold actions in the ``info`` of ``reset`` (for the oracle
            agent and env validation only; off by default so no agent sees them by accident).
    """

    # render_fps is declared for Gymnasium's checker; text renders have no frame rate to keep.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 1}
    #: One of :data:`lumos_gym.envs.tasks.TASK_TYPES`.
    task_type: ClassVar[str] = "math"
    #: The tools of the env, in the order of its grounding instruction.
    default_tools: ClassVar[tuple[str, ...]] = ()
    #: The metric used as the terminal reward.
    primary_metric: ClassVar[str] = "accuracy"
    #: The name of the scoring rule the env scores with by default (a
    #: :class:`~lumos_gym.scoring.scorers.Scorer` name, e.g. ``gsm8k/official``). Envs that
    #: offer a choice take a ``scorer`` constructor option and set ``self.scorer``; ``run.json``
    #: records ``env.scorer`` per env.
    default_scorer: ClassVar[str | None] = None
    #: Constructor options that make the env replay gold trajectories and annotations
    #: deterministically (e.g. reference backends for model-backed tools); used by replay
    #: verification, never by agents.
    replay_options: ClassVar[dict[str, Any]] = {}
    #: True when episodes end with the agent's ``Answer(...)``; False when the environment
    #: ends them (web, games: see :class:`EpisodeSession`), with ``Stop()`` to give up.
    ends_by_answer: ClassVar[bool] = True
    #: The keys ``reset``'s ``options`` may hold; another is a :class:`ResetOptionsError`.
    reset_option_keys: ClassVar[frozenset[str]] = RESET_OPTION_KEYS

    def __init__(
        self,
        *,
        tasks: Sequence[Task] | TaskSource,
        tools: Sequence[str] | Mapping[str, Mapping[str, Any]] | None = None,
        render_mode: str | None = None,
        limit: int | None = None,
        privileged: bool = False,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.privileged = privileged
        if getattr(self, "scorer", None) is None:
            self.scorer: str | None = self.default_scorer
        if isinstance(tasks, TaskSource):
            self.source: TaskSource | None = tasks
            task_list = tasks.load()
        else:
            self.source = None
            task_list = list(tasks)
        if limit is not None:
            task_list = task_list[:limit]
        if not task_list:
            raise LumosGymError(f"{type(self).__name__} has no tasks")
        self.tasks: list[Task] = task_list
        self._by_id = {t.id: i for i, t in enumerate(task_list)}
        if len(self._by_id) != len(task_list):
            raise LumosGymError(f"{type(self).__name__}: task ids are not unique")
        self.toolset = Toolset(tools if tools is not None else self.default_tools)
        self.observation_space = TextSpace(MAX_OBSERVATION_CHARS)
        self.action_space = TextSpace(MAX_ACTION_CHARS)
        self._episode: EpisodeState | None = None
        self._transcript: list[str] = []

    # ----------------------------------------------------------------------------- contract
    def task_ids(self) -> list[str]:
        """Return the ids of the env's tasks, in source order (``reset`` takes them)."""
        return [task.id for task in self.tasks]

    @property
    def action_specs(self) -> list[ToolSpec]:
        """Return the specs of every allowed action, the terminal ``Answer`` (``Stop``) last."""
        return [*self.toolset.specs, ANSWER_SPEC if self.ends_by_answer else STOP_SPEC]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on a task.

        A reset that raises leaves the env as usable as before it: the options are checked
        before anything changes, and an episode that fails to start (its engine) is dropped, so
        that the next ``reset`` starts afresh (through ``gymnasium.make``'s checker too).

        Args:
            seed: seeds ``np_random``, which draws the task when none is named.
            options: ``{"task_id": ...}`` or ``{"index": i}`` (``0 <= i < len(tasks)``) picks the
                task. In a privileged env, ``{"reference": {...}}`` adds gold facts for reference
                tool backends, merged one level deep into :meth:`task_reference` (replay
                verification passes an annotation's own ``QA`` results this way).

        Raises:
            ResetOptionsError: ``options`` is not a mapping, holds another key than those of
                :attr:`reset_option_keys`, names an unknown task id or a bad index (one that is
                not an int is also a ``TypeError``, one out of range a ``ValueError``).
        """
        try:
            return self._reset(seed, self.check_reset_options(options))
        except Exception:
            _rearm_env_checker(self)
            raise

    def check_reset_options(self, options: Any) -> Mapping[str, Any]:
        """Return ``options`` of :meth:`reset` (None: none) once checked; changes nothing.

        Raises:
            ResetOptionsError: as :meth:`reset` says.
        """
        return validate_reset_options(options, self._by_id, owner=type(self).__name__,
                                      known=self.reset_option_keys)

    def _reset(self, seed: int | None, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self._pick_task(options)
        reference: dict[str, Any] = {}
        if self.privileged:
            reference = {k: _copy_level(v) for k, v in self.task_reference(task).items()}
            for key, value in dict(options.get("reference") or {}).items():
                if isinstance(value, Mapping) and isinstance(reference.get(key), dict):
                    reference[key] = {**value, **reference[key]}
                else:
                    reference.setdefault(key, value)
        self._close_session()
        context = ToolContext(
            task_text=task.question,
            documents=tuple(self.task_documents(task)),
            reference=reference,
        )
        self._episode = EpisodeState(task=task, context=context)
        try:
            context.session = self.open_session(task)
            text = normalize_text(self.task_observation(task))
        except Exception:  # no half-started episode: step asks for a reset, which starts afresh
            self._close_session()
            self._episode = None
            raise
        self._transcript = [f"Task: {text}"]
        info = self._info()
        if self.privileged:
            info["gold_actions"] = list(task.gold_actions)
        return self.observation_for(text, self._episode), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run the grounded actions in ``action`` and return their results as text."""
        episode = self._episode
        if episode is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if episode.done:
            raise gym.error.ResetNeeded("the episode has ended; call reset()")
        episode.steps += 1
        episode.tool_crash = None
        lines = self._execute(episode, action if isinstance(action, str) else str(action))
        observation = normalize_text("\n".join(lines))
        reward = 0.0
        info = self._info()
        if episode.done:
            metrics = episode.metrics
            if metrics is None:
                metrics = self.score(episode.prediction or "", episode.task)
            reward = float(metrics[self.primary_metric])
            info["metrics"] = metrics
            info["prediction"] = episode.prediction
            info["gold_answer"] = episode.task.answer
        self._transcript += [f"> {action}", observation]
        if self.render_mode == "human":
            print(f"> {action}\n{observation}")
        return self.observation_for(observation, episode), reward, episode.done, False, info

    def render(self) -> str | None:
        """Return (``"ansi"``) or print (``"human"``) the episode transcript so far."""
        text = "\n".join(self._transcript)
        if self.render_mode == "ansi":
            return text
        if self.render_mode == "human":
            print(text)
        return None

    def close(self) -> None:
        """Close the episode's session and the tools (sandboxes, servers). Idempotent."""
        self._close_session()
        self.toolset.close()
        super().close()

    # ---------------------------------------------------------------------- for subclasses
    def task_observation(self, task: Task) -> str:
        """Return the first observation of an episode: the task text."""
        return task.question

    def task_documents(self, task: Task) -> Sequence[Document]:
        """Return the task's own corpus (e.g. HotpotQA's context paragraphs); none by default."""
        return ()

    def task_reference(self, task: Task) -> Mapping[str, Any]:
        """Return gold facts for reference tool backends; given to tools only when privileged."""
        return {}

    def open_session(self, task: Task) -> EpisodeSession | None:
        """Open the episode's live engine (given to tools as ``ToolContext.session``); none here."""
        return None

    def rewrite_action(self, text: str) -> str:
        """Map another action grammar onto grounded actions before parsing; identity here.

        WebShop's ``search[...]``/``click[...]`` and bare game commands come in this way.
        """
        return text

    def observation_for(self, text: str, episode: EpisodeState) -> Any:
        """Return the observation holding ``text`` (Dict-space envs add the image here)."""
        return text

    @abstractmethod
    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Return every metric of the task type for ``prediction``; must hold ``primary_metric``.

        Envs whose episodes the environment ends take their metrics from the session instead,
        and may return the metrics of a failed episode here.
        """

    # ---------------------------------------------------------------------------- internals
    def _pick_task(self, options: Mapping[str, Any]) -> Task:
        """Return the task ``options`` (checked) name, else one drawn from ``np_random``."""
        if "task_id" in options:
            return self.tasks[self._by_id[options["task_id"]]]
        if "index" in options:
            return self.tasks[int(options["index"])]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def _close_session(self) -> None:
        episode = self._episode
        if episode is not None and episode.context.session is not None:
            session, episode.context.session = episode.context.session, None
            session.close()

    def _info(self) -> dict[str, Any]:
        episode = self._episode
        assert episode is not None
        info = {
            "task_id": episode.task.id,
            "task_type": self.task_type,
            "actions": [spec.describe() for spec in self.action_specs],
            "action_names": [spec.name for spec in self.action_specs],
            "instruction_actions": self.toolset.names,
            "steps": episode.steps,
            "num_actions": episode.actions,
            "invalid_actions": episode.invalid_actions,
            "tool_errors": episode.tool_errors,
            "error_kinds": dict(episode.error_kinds),
            "variables": dict(episode.context.variables),
            "tool_seconds": round(episode.tool_seconds, 6),
        }
        if episode.tool_crash is not None:
            info["tool_crash"] = episode.tool_crash
        session = episode.context.session
        if not self.ends_by_answer and not episode.done and session is not None:
            # what a step-limit truncation scores (partial game score, no purchase yet)
            info["metrics_so_far"] = session.metrics()
        return info

    def _execute(self, episode: EpisodeState, text: str) -> list[str]:
        """Execute the actions of one step, stopping at the first error."""
        control = _CONTROL.search(text)
        if control:
            episode.count_error("control-character")
            return [
                f"Error: the action holds a control character ({control.group(0)!r}) at "
                f"position {control.start()}; write plain text"
            ]
        try:
            actions = parse_actions(self.rewrite_action(text))
        except LumosGymError as e:
            episode.count_error("parse")
            return [f"Error: cannot parse the action: {e}"]
        if len(actions) > MAX_ACTIONS_PER_STEP:
            episode.count_error("too-many-actions")
            return [f"Error: {len(actions)} actions in one step; at most {MAX_ACTIONS_PER_STEP}"]
        lines: list[str] = []
        for act in actions:
            episode.actions += 1
            try:
                lines.append(self._run_one(episode, act))
            except _ActionFailure as failure:
                episode.count_error(failure.kind)
                lines.append(f"Error: {failure.message}")
                break
            if episode.done or self._session_ended(episode):
                break
        self._session_ended(episode)  # a failed action may still have ended the game
        return lines

    def _session_ended(self, episode: EpisodeState) -> bool:
        """End an env-ended episode whose session says it is over; return True if it is."""
        session = episode.context.session
        if self.ends_by_answer or episode.done or session is None or not session.done:
            return episode.done
        episode.done = True
        episode.metrics = dict(session.metrics())
        return True

    def _run_one(self, episode: EpisodeState, act: Action) -> str:
        variables = episode.context.variables
        assert isinstance(variables, dict)
        display: str | None = None
        if act.name == "Answer" and self.ends_by_answer:
            return self._answer(episode, act)
        if act.name == "Stop" and not self.ends_by_answer:
            return self._stop(episode)
        if act.is_alias:
            if act.args not in variables:
                raise _ActionFailure("undefined-variable", f"undefined variable {act.args}")
            values: tuple[str, ...] = (variables[act.args],)
        else:
            tool = self.toolset.get(act.name or "")
            if tool is None:
                allowed = ", ".join(spec.name for spec in self.action_specs)
                raise _ActionFailure(
                    "unknown-tool", f"unknown action {act.name!r}; allowed: {allowed}"
                )
            started = time.perf_counter()
            try:
                result = tool.run(act.without_result(), episode.context)
            except LumosGymError as e:
                kind = "tool" if isinstance(e, ToolError) else "undefined-variable"
                raise _ActionFailure(kind, f"{act.name}: {e}") from e
            except Exception as e:  # a tool bug must not end the run: report it as an error
                episode.tool_crash = f"{act.name} failed: {type(e).__name__}: {e}"
                raise _ActionFailure("tool", episode.tool_crash) from e
            finally:
                episode.tool_seconds += time.perf_counter() - started
            values = result.values
            display = result.display
            if not act.outputs:
                return result.text
        if len(values) != len(act.outputs):
            raise _ActionFailure(
                "tool",
                f"{act.name or 'alias'} gave {len(values)} value(s) for "
                f"{len(act.outputs)} output variable(s)",
            )
        for var, value in zip(act.outputs, values, strict=True):
            variables[var] = value
        if display is not None:
            return f"{', '.join(act.outputs)} = {display}"
        return f"{', '.join(act.outputs)} = {', '.join(values)}"

    def _answer(self, episode: EpisodeState, act: Action) -> str:
        try:
            prediction = substitute(act.args, episode.context.variables).strip()
        except LumosGymError as e:
            raise _ActionFailure("undefined-variable", f"Answer: {e}") from e
        episode.prediction = prediction
        episode.done = True
        return f"Answer submitted: {prediction}"


    def _stop(self, episode: EpisodeState) -> str:
        session = episode.context.session
        episode.metrics = dict(session.metrics()) if session is not None else None
        if episode.metrics is None or self.primary_metric not in episode.metrics:
            episode.metrics = self.score("", episode.task)
        episode.done = True
        return "Stopped."


class ResetOptionsError(LumosGymError, ValueError):
    """``reset``'s options are not ones the env takes: another key, an unknown task, a bad index."""


class ResetOptionsTypeError(ResetOptionsError, TypeError):
    """``reset``'s options, or a value in them, are of the wrong type."""


def validate_reset_options(options: Any, task_ids: Collection[str], *, owner: str = "the env",
                           known: Collection[str] = RESET_OPTION_KEYS) -> Mapping[str, Any]:
    """Return the options of a ``reset`` (None: none) once checked against the env's tasks.

    What :meth:`LumosEnv.reset` checks before it changes anything, and what ``serve-env``
    checks before a session is opened.

    Args:
        options: the options given.
        task_ids: the env's task ids (``index`` ranges over ``0 .. len(task_ids) - 1``).
        owner: names the env in the errors.
        known: the keys the options may hold.

    Raises:
        ResetOptionsTypeError: ``options`` is not a mapping, ``task_id`` not a string, ``index``
            not an int or ``reference`` not a mapping.
        ResetOptionsError: another key than ``known``, an unknown task id, an index out of
            range.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ResetOptionsTypeError(
            f"reset options must be a dict such as {{'index': 0}} or {{'task_id': ...}}, "
            f"not {type(options).__name__} ({options!r:.60})"
        )
    unknown = sorted(str(key)[:60] for key in options if key not in known)
    if unknown:
        raise ResetOptionsError(
            f"reset options: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"{owner} takes {', '.join(sorted(known))}"
        )
    if "task_id" in options:
        task_id = options["task_id"]
        if not isinstance(task_id, str):
            raise ResetOptionsTypeError(
                f"reset options: 'task_id' must be a string, not {type(task_id).__name__}"
            )
        if task_id not in task_ids:
            raise ResetOptionsError(
                f"unknown task_id {task_id[:200]!r} ({len(task_ids)} tasks in {owner})"
            )
    if "index" in options:
        index = options["index"]
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise ResetOptionsTypeError(
                f"reset options: 'index' must be an int, not {type(index).__name__} "
                f"({index!r:.60})"
            )
        if not 0 <= index < len(task_ids):
            raise ResetOptionsError(
                f"reset options: 'index' {index} is out of range: {owner} "
                f"has {len(task_ids)} tasks, 0 to {len(task_ids) - 1}"
            )
    reference = options.get("reference")
    if reference is not None and not isinstance(reference, Mapping):
        raise ResetOptionsTypeError(
            f"reset options: 'reference' must be a dict, not {type(reference).__name__}"
        )
    return options


def _rearm_env_checker(env: gym.Env) -> None:
    """Let Gymnasium's ``PassiveEnvChecker`` take the next reset of ``env`` as its first.

    The checker marks its first reset as checked before it calls the env and keeps that call's
    result for its first step; when that reset raises, the mark stays with no result, and the
    first step then fails inside the checker (``TypeError: cannot unpack non-iterable
    NoneType``) however well the env was reset since. The env holds no reference to its
    wrappers, so the checker is found among the callers of this reset (``gymnasium.make`` puts
    it right around the env, a few frames up) and its mark is cleared.
    """
    frame = sys._getframe(1)
    for _ in range(32):  # far more frames than any wrapper chain of gymnasium.make
        if frame is None:
            return
        caller = frame.f_locals.get("self")
        if (
            isinstance(caller, gym.wrappers.PassiveEnvChecker)
            and caller.unwrapped is env
            and caller.checked_reset
            and not caller.checked_step
            and getattr(caller, "_previous_data", None) is None
        ):
            caller.checked_reset = False
            return
        frame = frame.f_back


def _copy_level(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


class _ActionFailure(Exception):
    """One action failed; carries the error kind counted in ``info`` and the message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
