"""Mind2Web: step-wise, teacher-forced web actions on recorded pages (``lumos/Mind2Web-v0``).

An episode walks a task's gold steps, as Lumos' and MindAct's evaluations do (docs/lumos-format.md
§1.5, §2.3). At step ``t`` the current page (``Env``) is the step's candidate set (positives and
negatives, at most 50, shuffled with a seed) shown as ``[tag] text`` lines. The agent acts with

* ``R1 = CLICK(Env, QUERY: <what to click>)``
* ``R2 = TYPE(R1, QUERY: <where to type>, TEXT: <text>)``
* ``R3 = SELECT(R2, QUERY: <which box>, TEXT: <option>)``

The element ranker of the tools (:mod:`lumos_gym.tools.mind2web`) picks the top-1 candidate of
the referenced page for the query; the step is scored (element, operation, value) and the
episode moves on to the next gold step whatever was predicted (teacher forcing). Each action's
result ``R<k>`` is the next step's page, and the observation names the element chosen and shows
that page. The episode ends after the last gold step with the metrics
``step_success_rate`` (the reward), ``element_accuracy``, ``operation_f1`` and ``success``,
scored by the rule ``scorer=`` names (:mod:`lumos_gym.scoring.mind2web`): ``mind2web/official``
(Mind2Web's own metric, the default) or ``mind2web/lumos`` (Lumos' evaluation).

Task sources (``source=``):

* ``"bundled"`` (default): tasks recorded from the offline shop site, shipped in the package
  (``lumos_gym/envs/data/mind2web/``, written by :mod:`lumos_gym.envs.web.mind2web_record`);
* ``"record"``: record ``num_tasks`` tasks anew from a shop server started on loopback:
  ``split="train"`` targets the shop's train products, ``"test_website"`` (the default) and the
  other test names its test products, and ``"validation"`` (for choices made before a test run:
  checkpoints, learning rates, round limits) the products that only the validation shop holds
  (:mod:`lumos_gym.envs.web.mind2web_record`), so the three share no target product and no task;
* ``"official"``: the official files under ``<cache>/data/mind2web/<split>/``;
* a path: an official file, a folder of them, or the data root holding the split folders.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from lumos_gym.envs import datasets as data
from lumos_gym.envs.base import EpisodeSession, LumosEnv
from lumos_gym.envs.sources import GeneratedSource, TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.envs.web import mind2web_record
from lumos_gym.envs.web.mind2web_data import (
    MAX_CANDIDATES,
    SPLITS,
    Candidate,
    Mind2WebSource,
    StepPage,
    StepScore,
    build_page,
    episode_metrics,
    load_candidate_ranks,
    score_step,
)
from lumos_gym.errors import DataError, ToolError, UndefinedVariableError
from lumos_gym.scoring.mind2web import OFFICIAL, resolve_scorer

__all__ = [
    "BUNDLED_SPLIT",
    "MIND2WEB_TOOLS",
    "Mind2WebEnv",
    "Mind2WebSession",
    "StepOutcome",
    "mind2web_source",
]

#: The tools of the env, in the order of Lumos' web grounding instruction.
MIND2WEB_TOOLS = ("CLICK", "TYPE", "SELECT")
#: The split of the bundled recorded tasks (a website no official split has: "test_website").
BUNDLED_SPLIT = "test_website"
_BUNDLED_FOLDER = "mind2web"
_PAGE_VALUE = "Page {number}"
_PAGE_RE = re.compile(r"\s*Page (\d+)\s*\Z")
_VARIABLE_RE = re.compile(r"R[0-9]+\Z")
_END_VALUE = "End of task"
_PAGE_CACHE = 256
_OFFICIAL_HINT = (
    "download the Mind2Web data (Hugging Face dataset osunlp/Mind2Web: data/train/*.json, and "
    "test.zip, password 'mind2web', for test_task/test_website/test_domain) and put each split "
    "folder under {root}"
)


def mind2web_source(
    source: str | Path = "bundled",
    *,
    split: str | None = None,
    num_tasks: int = 24,
    record_seed: int = 0,
) -> TaskSource:
    """Return the task source of the env (see the module docstring).

    Args:
        source: ``"bundled"``, ``"record"``, ``"official"`` or a path.
        split: the split; defaults to ``test_website`` (bundled, record), ``test_domain``
            (official, Lumos' evaluation split) or the path's own (:func:`infer_split`);
            ``record`` also records ``train`` and ``validation``.
        num_tasks: tasks to record (``"record"`` only).
        record_seed: the recording seed (``"record"`` only).
    """
    if source == "bundled":
        from importlib import resources

        folder = Path(str(resources.files("lumos_gym.envs").joinpath("data", _BUNDLED_FOLDER)))
        chosen = split or BUNDLED_SPLIT
        return Mind2WebSource(
            folder / chosen, split=chosen, kind="bundled",
            shown_path=f"lumos_gym/envs/data/{_BUNDLED_FOLDER}/{chosen}",
        )
    if source == "record":
        chosen = split or BUNDLED_SPLIT
        recordable = (*SPLITS, mind2web_record.VALIDATION_SPLIT)
        if chosen not in recordable:  # a typo would otherwise record the test products
            raise DataError(f"a recorded Mind2Web split must be one of {recordable}, got "
                            f"{chosen!r}")

        def generate() -> list[Task]:
            return mind2web_record.record_tasks(split=chosen, num_tasks=num_tasks, seed=record_seed)

        params = {"generator": "mind2web-record", "split": chosen, "num_tasks": num_tasks,
                  "seed": record_seed}
        return GeneratedSource(generate, params)
    if source == "official":
        chosen = split or "test_domain"
        if chosen not in SPLITS:
            raise DataError(f"Mind2Web split must be one of {SPLITS}, got {chosen!r}")
        root = data.cache_root() / "data" / "mind2web"
        return Mind2WebSource(root / chosen, split=chosen, hint=_OFFICIAL_HINT.format(root=root))
    return Mind2WebSource(Path(source), split=split)


@dataclass(frozen=True)
class StepOutcome:
    """What one CLICK/TYPE/SELECT did: the bound value and the observation text.

    Attributes:
        value: ``"Page <n>"`` (the next step's page) or ``"End of task"``.
        text: the element chosen and the next page.
        score: the step's score.
    """

    value: str
    text: str
    score: StepScore


class Mind2WebSession(EpisodeSession):
    """One episode: the gold steps walked so far and the score of each.

    Args:
        task: the task.
        page: returns the page of a step (built on first use and cached by the env).
        scorer: the scoring rule (``mind2web/official`` or ``mind2web/lumos``).
    """

    def __init__(
        self, task: Task, page: Callable[[Task, int], StepPage], scorer: str = OFFICIAL
    ) -> None:
        self.task = task
        self.scorer = resolve_scorer(scorer)
        self.steps = len(task.meta["actions"])
        self.step = 0
        self.scores: list[StepScore | None] = [None] * self.steps
        self._page = page
        self.skipped = self._skip_empty()

    def _skip_empty(self) -> list[int]:
        """Score the pages without candidates from the current step on as failed and pass them.

        Nothing can be acted on there (the cleaning kept no element), so they count as failed
        steps, and the episode moves on to the next page that has candidates (or ends).
        """
        skipped = []
        while not self.done and not self._page(self.task, self.step).candidates:
            self.scores[self.step] = StepScore(False, False, 0.0)
            skipped.append(self.step + 1)
            self.step += 1
        return skipped

    @property
    def done(self) -> bool:
        """Return True once every gold step has been acted on."""
        return self.step >= self.steps

    def metrics(self) -> dict[str, float]:
        """Return the metrics over all gold steps (steps not reached count as failures)."""
        return episode_metrics(self.scores, self.steps)

    def current(self) -> StepPage:
        """Return the page of the current step.

        Raises:
            ToolError: when the task's steps are over.
        """
        if self.done:
            raise ToolError("the task's steps are over; Stop() ends the episode")
        return self._page(self.task, self.step)

    def previous_actions(self, count: int = 3) -> list[str]:
        """Return the gold ``action_reprs`` of the last ``count`` steps before the current."""
        reprs = [str(r) for r in self.task.meta["action_reprs"]]
        return reprs[max(0, self.step - count) : self.step]

    def resolve(self, reference: str, variables: Mapping[str, str]) -> StepPage:
        """Return the page an action's first argument names: ``Env`` or an ``R<k>``.

        ``Env`` is the current page; ``R<k>`` is the page bound by an earlier action (which may
        be an earlier step's page: the element then cannot be right).

        Raises:
            UndefinedVariableError: an ``R<k>`` no action bound.
            ToolError: anything else, or a variable that holds no page.
        """
        name = reference.strip() or "Env"
        if name.lower() == "env":
            return self.current()
        if not _VARIABLE_RE.match(name):
            raise ToolError(f"the first argument must be Env or a page variable R<k>, got {name!r}")
        if name not in variables:
            bound = ", ".join(sorted(variables)) or "none"
            raise UndefinedVariableError(f"undefined variable {name} (defined: {bound})")
        match = _PAGE_RE.match(str(variables[name]))
        if match is None:
            raise ToolError(f"{name} holds no page ({variables[name]!r})")
        number = int(match.group(1))
        if not 1 <= number <= self.steps:
            raise ToolError(f"{name} names page {number}; the task has {self.steps}")
        return self._page(self.task, number - 1)

    def act(self, page: StepPage, chosen: Candidate | None, op: str, value: str) -> StepOutcome:
        """Score a prediction on the current step and move on to the next gold step.

        Args:
            page: the page the element was picked on.
            chosen: the element picked (None when the page had none).
            op: CLICK, TYPE or SELECT.
            value: the typed text or chosen option ("" for CLICK).

        Raises:
            ToolError: when the task's steps are over.
        """
        gold = self.current()
        score = score_step(
            gold, chosen, op, value, on_page=page.step == gold.step, scorer=self.scorer
        )
        self.scores[self.step] = score
        self.step += 1
        skipped = self._skip_empty()
        if chosen is None:
            did = f"Nothing to {op.lower()} on page {page.number}."
        elif op == "TYPE":
            did = f"Typed {value!r} into {chosen.label}."
        elif op == "SELECT":
            did = f"Selected {value!r} in {chosen.label}."
        else:
            did = f"Clicked {chosen.label}."
        if skipped:
            numbers = ", ".join(str(n) for n in skipped)
            did += f" Page {numbers} had no candidate elements and counts as failed."
        if self.done:
            text = f"{did} That was the task's last step ({self.steps} of {self.steps})."
            return StepOutcome(_END_VALUE, text, score)
        following = self._page(self.task, self.step)
        value_text = _PAGE_VALUE.format(number=following.number)
        return StepOutcome(value_text, f"{did}\n{following.listing()}", score)


class Mind2WebEnv(LumosEnv):
    """Mind2Web's step-wise web tasks (task type ``web``).

    Args:
        source: ``"bundled"`` (tasks recorded from the shop site), ``"record"``,
            ``"official"`` or a path (see :func:`mind2web_source`).
        split: the split (defaults depend on the source).
        ranker: the element ranker of CLICK/TYPE/SELECT: ``"embed"`` (MiniLM, default),
            ``"bm25"``, ``"cross-encoder"`` (``ranker_model`` = an HF sequence-classification
            model, e.g. ``osunlp/MindAct_CandidateGeneration_deberta-v3-base``) or ``"oracle"``
            (gold; for replays).
        ranker_model: the ranker's model (folder or hub id) where it takes one.
        ranker_options: more ranker options, e.g. ``{"query_format": "mindact"}``.
        max_candidates: candidates per page (50, as Lumos and MindAct).
        candidate_seed: seeds the shuffle of each page's candidates.
        candidate_ranks: MindAct's ``scores_all_data.pkl``: pages keep the best-ranked
            candidates instead of the positives first.
        task_page: show the first page in the reset observation after the task (default); off,
            the reset observation is the task and its website only.
        num_tasks: tasks to record (``source="record"``).
        record_seed: the recording seed (``source="record"``).
        scorer: the scoring rule: ``"mind2web/official"`` (default; Mind2Web's own metric) or
            ``"mind2web/lumos"`` (Lumos' evaluation); ``"official"`` and ``"lumos"`` work too
            (:mod:`lumos_gym.scoring.mind2web`).
        **options: :class:`~lumos_gym.envs.base.LumosEnv` options (``limit``,
            ``render_mode``, ``privileged``, ``tools``).
    """

    task_type: ClassVar[str] = "web"
    default_tools: ClassVar[tuple[str, ...]] = MIND2WEB_TOOLS
    primary_metric: ClassVar[str] = "step_success_rate"
    replay_options: ClassVar[dict[str, Any]] = {"ranker": "oracle"}
    ends_by_answer: ClassVar[bool] = False
    default_scorer: ClassVar[str | None] = OFFICIAL
    #: The converter name (``lumos_gym.conversion.mind2web_rules``).
    dataset = "mind2web"

    def __init__(
        self,
        *,
        source: str | Path = "bundled",
        split: str | None = None,
        ranker: str = "embed",
        ranker_model: str | None = None,
        ranker_options: Mapping[str, Any] | None = None,
        max_candidates: int = MAX_CANDIDATES,
        candidate_seed: int = 0,
        candidate_ranks: str | Path | None = None,
        task_page: bool = True,
        num_tasks: int = 24,
        record_seed: int = 0,
        scorer: str = OFFICIAL,
        **options: Any,
    ) -> None:
        self.scorer: str | None = resolve_scorer(scorer)
        if max_candidates < 1:
            raise ValueError(f"max_candidates must be at least 1, got {max_candidates}")
        self.max_candidates = max_candidates
        self.candidate_seed = candidate_seed
        self.task_page = task_page
        self.ranks = load_candidate_ranks(candidate_ranks) if candidate_ranks else None
        self._pages: OrderedDict[tuple[str, int], StepPage] = OrderedDict()
        if options.get("tools") is None:
            backend = {"backend": ranker, **dict(ranker_options or {})}
            if ranker_model:
                backend["model"] = ranker_model
            options["tools"] = {name: dict(backend) for name in MIND2WEB_TOOLS}
        tasks = mind2web_source(source, split=split, num_tasks=num_tasks, record_seed=record_seed)
        super().__init__(tasks=tasks, **options)

    def page(self, task: Task, step: int) -> StepPage:
        """Return the page of a task's step (built once, kept in a small cache)."""
        key = (task.id, step)
        page = self._pages.get(key)
        if page is None:
            page = build_page(task, step, max_candidates=self.max_candidates,
                              seed=self.candidate_seed, ranks=self.ranks)
            self._pages[key] = page
            while len(self._pages) > _PAGE_CACHE:
                self._pages.popitem(last=False)
        else:
            self._pages.move_to_end(key)
        return page

    def open_session(self, task: Task) -> Mind2WebSession:
        """Start walking the task's gold steps."""
        return Mind2WebSession(task, self.page, self.scorer or OFFICIAL)

    def task_observation(self, task: Task) -> str:
        """Return the task, its website and (``task_page``) the first page."""
        website = str(task.meta.get("website") or "").strip()
        lines = [task.question]
        if website:
            lines.append(f"Website: {website}")
        if self.task_page:
            session = self._episode.context.session if self._episode is not None else None
            if not isinstance(session, Mind2WebSession) or session.task is not task:
                session = Mind2WebSession(task, self.page, self.scorer or OFFICIAL)
            lines.append("")
            if session.skipped:
                numbers = ", ".join(str(n) for n in session.skipped)
                lines.append(f"Page {numbers} had no candidate elements and counts as failed.")
            if session.done:
                lines.append("No page of the task has candidate elements; Stop() ends it.")
            else:
                lines.append(session.current().listing())
        return "\n".join(lines)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run the actions; ``info`` also gives the gold steps walked so far.

        ``info["gold_previous_actions"]`` holds the ``action_reprs`` of the gold steps already
        passed: Lumos' evaluation rebuilds the planner's history from them (``translate_action``,
        docs/lumos-format.md §1.5), and they say nothing the next page does not show.
        """
        observation, reward, terminated, truncated, info = super().step(action)
        session = self._episode.context.session if self._episode is not None else None
        if isinstance(session, Mind2WebSession):
            info["gold_previous_actions"] = session.previous_actions(session.step)
        return observation, reward, terminated, truncated, info

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Return the metrics of an episode that acted on no step."""
        return episode_metrics([], len(task.meta.get("actions") or ()))
