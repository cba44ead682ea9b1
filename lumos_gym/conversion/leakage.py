"""Leakage between training data and test tasks: shared task texts, task ids and world entities.

``lumos-gym data leakage --train DATA --suite NAME`` and ``lumos-gym reproduce`` check that the
training data and the test tasks share no task. Three things are compared:

* **Task texts.** Each test task's text, normalised (:func:`normalise_text`: Unicode NFKC,
  case folded, every run of characters that are not letters or digits one space), against the
  normalised task of every training annotation and, as a phrase, against every user or system
  message of every training record (the exports of ``lumos-gym export``, the QA tool's records).
* **Task ids.** Each test task's id against the training annotations' ids.
* **Entities** of the generated worlds, where an env exposes them (:data:`ENTITY_READERS`):
  WorldQA's encyclopedia names (the pages a question rests on, and every page title of the
  world), the WebShop target product (the goal's: the shop itself, and the products an expert
  buys when another fits the goal, are shared by design), the Mind2Web target product, the
  Scenes picture, and the TextWorld and ALFWorld game files (by content). The training side's
  entities come from the train splits rebuilt with the arguments the data build used (its
  ``splits.json``), keeping the tasks the annotations name.

Generated questions share templates on purpose (a Scenes question asks "How many circles are
there?" of many pictures; ALFWorld asks to "put a tissuebox in toilet" in many rooms), so for an
env with entities a test task is a *shared task* only when a training task has its text **and**
one of its entities (the same picture, the same game); for the others, when its text or id is
in the training data. The data is clean when no task and no entity is shared.

**Near duplicates** are reported beside the shared tasks, never counted as shared (the data stays
*clean* with them; ``data leakage --strict`` refuses them too). A test task that is not shared
is a near duplicate of a training task when (:func:`near_keys`):

* **problems with a gold answer** (task types ``math`` and ``qa``, :data:`NUMBER_KEY_TYPES`;
  a web task's "answer" is its actions, a picture's question is about its picture, and a
  ``code`` task has tests): both have the same *number key*, the numbers
  of the question as a multiset (digits, thousands commas, decimals, ``$`` and ``%`` dropped,
  and the multipliers ``twice``, ``double``, ``triple`` and ``half``) with the gold answer. Words
  play no part, so a problem reworded with other names, items and sentences has the key of its
  original. With three numbers or more the match is a *near duplicate*; with one or two it is
  *weak*: two numbers and their sum collide by chance between unrelated problems (``4 books, 2
  thrown away`` and ``4 chocolate bars, 2 given away``), so weak matches are counted apart and
  never fail a check. A question without a number, or a task without an answer, has no key.
* **games** (task type ``game``: TextWorld, ALFWorld): the same walkthrough (the gold commands,
  normalised) with at least :data:`NEAR_GAME_ACTIONS` commands that are not a move (``go
  east``, ``go to countertop 1``), played from the same opening room (the first observation
  without the goal text, where both tasks record one): the same quest in the same world, built
  into another file, the goal perhaps reworded ("put a clean cloth in shelf", "clean some cloth
  and put it in shelf"). Weak: the same walkthrough from another room (a TextWorld kitchen
  whose recipe needs the same ingredient from the fridge), a walkthrough of moves and one other
  command (the coin collector's ``go east, go north, take coin``), or the same goal text
  (games share goal templates by design: "put a tissuebox in toilet").

The training side of the number keys is every ``math`` and ``qa`` annotation (its task and
``answer``) and the tasks of the rebuilt train splits; that of the games, the tasks of the
rebuilt train splits.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from lumos_gym.conversion.pipeline import OFFLINE_SPLITS, SPLITS_FILE, split_kwargs
from lumos_gym.envs.registration import make_env
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError
from lumos_gym.scoring.answers import normalize_number
from lumos_gym.text import table

#: Shared tasks or entities named per env in a report.
EXAMPLES = 3
#: Near duplicates (and weak matches) named per env in a report.
NEAR_EXAMPLES = 5
LEAKAGE_FILE = "leakage.json"
"""The leakage report a run writes beside what it trained on (``reproduce``, ``improve``,
``grpo``); a training card reads it from there."""
_NOT_WORD = re.compile(r"[^\w]+|_+")
#: Numbers in a question: digits (thousands commas, decimals) and the multiplier words.
_NUMBER = re.compile(r"(?<![\w.,])\d+(?:,\d{3})*(?:\.\d+)?|\b(?:twice|double|triple|half)\b",
                     re.IGNORECASE)
_NUMBER_WORDS = {"twice": "2", "double": "2", "triple": "3", "half": "0.5"}
#: Numbers a question needs for its number key to count as a near duplicate (fewer: weak).
NEAR_NUMBERS = 3
#: The task types whose tasks have a number key (a question and a gold answer).
NUMBER_KEY_TYPES = ("math", "qa")
#: Commands other than moves a game walkthrough needs to count as a near duplicate.
NEAR_GAME_ACTIONS = 2
_MOVE = re.compile(r"^go\b")


# ------------------------------------------------------------------------------------ texts
def normalise_text(text: str) -> str:
    """Return ``text`` NFKC-normalised, case folded, with every non-alphanumeric run one space."""
    folded = unicodedata.normalize("NFKC", str(text)).casefold()
    return " ".join(_NOT_WORD.sub(" ", folded).split())


class TextIndex:
    """Normalised texts, searched for a phrase at word boundaries (a word index narrows it)."""

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._seen: set[str] = set()
        self._words: dict[str, set[int]] = {}

    def __len__(self) -> int:
        return len(self._texts)

    def add(self, text: str) -> None:
        """Add one text (normalised here; a text seen before is kept once)."""
        normal = normalise_text(text)
        if not normal or normal in self._seen:
            return
        self._seen.add(normal)
        n = len(self._texts)
        self._texts.append(f" {normal} ")
        for word in set(normal.split()):
            self._words.setdefault(word, set()).add(n)

    def contains(self, phrase: str) -> bool:
        """Whether some text holds ``phrase`` (normalised here) as a run of whole words."""
        words = normalise_text(phrase).split()
        if not words or any(w not in self._words for w in words):
            return False
        rarest = sorted(set(words), key=lambda w: len(self._words[w]))[:2]
        candidates = set.intersection(*(self._words[w] for w in rarest))
        needle = f" {' '.join(words)} "
        return any(needle in self._texts[n] for n in candidates)


# ----------------------------------------------------------------------------- near duplicates
@dataclass(frozen=True)
class NearKey:
    """One key under which two tasks are near duplicates (see the module docstring).

    Attributes:
        kind: ``numbers``, ``game`` (walkthrough and opening room), ``walkthrough`` or ``goal``.
        value: the key itself (hashable).
        strong: a near duplicate when it matches (else a weak match).
        shown: the key as a report shows it.
    """

    kind: str
    value: Any
    strong: bool
    shown: str


def number_key(question: str, answer: str) -> tuple[tuple[str, ...], str] | None:
    """The numbers of ``question`` (sorted, canonical) and the canonical ``answer``, or None.

    None when the question holds no number or the answer is empty.
    """
    numbers = []
    for found in _NUMBER.findall(str(question)):
        word = _NUMBER_WORDS.get(found.lower())
        numbers.append(word or normalize_number(found.replace(",", "")) or found)
    answer = str(answer or "").strip()
    if not numbers or not answer:
        return None
    return tuple(sorted(numbers)), normalize_number(answer) or normalise_text(answer)


def walkthrough(task: Task) -> tuple[str, ...]:
    """A game's gold commands, normalised (its ``gold_commands``, else its gold actions)."""
    commands = task.meta.get("gold_commands") if isinstance(task.meta, Mapping) else None
    if not commands:
        commands = [part for step in task.gold_actions for part in str(step).split("; ")]
        commands = [re.sub(r"^R\d+ = Command\((.*)\)$", r"\1", c.strip()) for c in commands]
    return tuple(normalise_text(c) for c in commands if normalise_text(c))


def opening_room(task: Task) -> str | None:
    """A game's first observation without its goal text, normalised (None: not recorded)."""
    observation = task.meta.get("observation") if isinstance(task.meta, Mapping) else None
    if not observation:
        return None
    return normalise_text(str(observation).replace(task.question, " ")) or None


def near_keys(task: Task) -> list[NearKey]:
    """The keys under which ``task`` may be a near duplicate of another."""
    if task.task_type == "game":
        keys = []
        walk, room = walkthrough(task), opening_room(task)
        if walk:
            acts = sum(1 for c in walk if not _MOVE.match(c))
            shown = (f"walkthrough of {len(walk)} command{'s' * (len(walk) != 1)}, {acts} "
                     "not a move")
            if room is not None:
                keys.append(NearKey("game", (walk, room), acts >= NEAR_GAME_ACTIONS,
                                    shown + ", from the same opening room"))
            keys.append(NearKey("walkthrough", walk, room is None and acts >= NEAR_GAME_ACTIONS,
                                shown))
        goal = normalise_text(task.question)
        if goal:
            keys.append(NearKey("goal", goal, False, "goal text"))
        return keys
    key = number_key(task.question, task.answer) if task.task_type in NUMBER_KEY_TYPES else None
    if key is None:
        return []
    numbers, answer = key
    return [NearKey("numbers", key, len(numbers) >= NEAR_NUMBERS,
                    f"numbers {', '.join(numbers)}; answer {answer}")]


def _problem_keys(question: str, answer: str) -> list[NearKey]:
    """The number key of an annotation (a text task: its task and gold answer)."""
    return near_keys(Task("annotation", question, answer, "math"))


# --------------------------------------------------------------------------------- entities
def _worldqa_entities(env: Any, task: Task) -> set[str]:
    return {f"name:{normalise_text(e[0])}" for e in task.meta.get("evidence") or () if e}


def _webshop_entities(env: Any, task: Task) -> set[str]:
    """The goal's target product (the expert may buy another product that fits the goal)."""
    asin = (task.meta.get("goal") or {}).get("asin")
    return {f"product:{str(asin).upper()}"} if asin else set()


def _mind2web_entities(env: Any, task: Task) -> set[str]:
    """The target product: the longest clicked link whose name the task text holds."""
    text = normalise_text(task.meta.get("confirmed_task") or task.question)
    names = []
    for action in task.meta.get("action_reprs") or ():
        match = re.match(r"\[link\]\s+(.*?) -> CLICK$", str(action))
        name = normalise_text(match.group(1)) if match else ""
        if name and f" {name} " in f" {text} ":
            names.append(name)
    return {f"product:{max(names, key=len)}"} if names else set()


def _scene_entities(env: Any, task: Task) -> set[str]:
    scene = task.meta.get("scene")
    if scene is None:
        return set()
    digest = hashlib.sha256(json.dumps(scene, sort_keys=True).encode()).hexdigest()
    return {f"picture:{digest[:16]}"}


def _game_entities(env: Any, task: Task) -> set[str]:
    path = Path(str(task.meta.get("path") or ""))
    if not path.is_file():
        return set()
    return {f"game:{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"}


#: Env id → the entity keys of a task (``kind:value``), for the generated worlds.
ENTITY_READERS: dict[str, Callable[[Any, Task], set[str]]] = {
    "lumos/WorldQA-v0": _worldqa_entities,
    "lumos/WebShop-v0": _webshop_entities,
    "lumos/Mind2Web-v0": _mind2web_entities,
    "lumos/Scenes-v0": _scene_entities,
    "lumos/TextWorld-v0": _game_entities,
    "lumos/ALFWorld-v0": _game_entities,
}


def _world_names(env: Any) -> set[str]:
    world = getattr(env, "world", None)
    return {normalise_text(title) for title in getattr(world, "pages", {})}


#: Env id → every entity name of the env's whole world (WorldQA's page titles).
WORLD_READERS: dict[str, Callable[[Any], set[str]]] = {"lumos/WorldQA-v0": _world_names}


# --------------------------------------------------------------------------------- the data
@dataclass(frozen=True)
class EvalTasks:
    """The test tasks of one env: its arguments, and which of its tasks (default all)."""

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    task_ids: tuple[str, ...] | None = None
    limit: int | None = None
    exclude: frozenset[str] = frozenset()


def eval_tasks(entries: Iterable[Any]) -> list[EvalTasks]:
    """Read suite entries (or reproduce's test envs): ``env_id``, ``kwargs``, ``task_ids``...

    An entry's ``excluded`` entries (the development suites' tasks its test suite leaves out:
    :func:`excluded_ids`) are left out of the tasks checked, as the suite's runs leave them.
    """
    return [EvalTasks(e.env_id, dict(getattr(e, "kwargs", None) or {}),
                      getattr(e, "task_ids", None), getattr(e, "limit", None),
                      frozenset(excluded_ids(getattr(e, "excluded", ()))))
            for e in entries]


def excluded_ids(entries: Iterable[Any]) -> set[str]:
    """The task ids that suite entries run: what a test suite that excludes them leaves out.

    An entry runs its ``task_ids``, else every task of its env, the first ``limit`` of them.
    """
    ids: set[str] = set()
    for entry in entries:
        env = make_env(entry.env_id, **dict(getattr(entry, "kwargs", None) or {}))
        try:
            available = env.unwrapped.task_ids()
        finally:
            env.close()
        chosen = list(entry.task_ids) if getattr(entry, "task_ids", None) else list(available)
        ids.update(chosen[: getattr(entry, "limit", None)])
    return ids


@dataclass
class TrainingData:
    """What a training set holds, read by :func:`read_training`.

    Attributes:
        files: the files read.
        ids: the annotations' task ids.
        texts: the annotations' normalised tasks.
        index: every user and system message of the training records.
        splits: the train splits the annotations came from (env id and arguments).
        problems: each annotation's id, task and gold answer (for the near duplicates).
    """

    files: list[Path] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)
    index: TextIndex = field(default_factory=TextIndex)
    splits: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    problems: list[tuple[str, str, str]] = field(default_factory=list)

    def has_text(self, text: str) -> bool:
        """Whether a normalised task text is an annotation's task or in a training message."""
        return text in self.texts or self.index.contains(text)


def _training_files(path: Path) -> tuple[list[Path], Path | None]:
    """The JSON-lines files of ``path`` and, for a data build folder, the folder itself."""
    if path.is_file():
        return [path], None
    if not path.is_dir():
        raise LumosGymError(f"no training data at {path}")
    if (path / "annotations").is_dir() or (path / "train").is_dir():  # a data build folder
        files = sorted((path / "annotations").glob("*.jsonl")) + sorted(
            (path / "train").glob("*.jsonl"))
        return [f for f in files if not f.name.endswith(".rejected.jsonl")], path
    return [f for f in sorted(path.glob("*.jsonl")) if not f.name.endswith(".rejected.jsonl")], None


def _read_lines(path: Path, data: TrainingData) -> None:
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn line: nothing to compare
            if not isinstance(record, dict):
                continue
            if "subgoal_plan" in record and "task" in record:  # an annotation
                data.ids.add(str(record.get("id")))
                data.texts.add(normalise_text(str(record["task"])))
                if (record.get("answer") not in (None, "")
                        and record.get("task_type", "math") in NUMBER_KEY_TYPES):
                    data.problems.append((str(record.get("id")), str(record["task"]),
                                          str(record["answer"])))
            for message in record.get("messages") or ():
                if isinstance(message, dict) and message.get("role") in ("user", "system"):
                    data.index.add(str(message.get("content") or ""))


def build_splits(folder: Path, num_tasks: int | None) -> list[tuple[str, dict[str, Any]]]:
    """The train splits of a data build folder: its ``splits.json``, else the offline splits.

    Without ``splits.json`` (a build made before it was written), the splits are those of this
    lumos-gym at ``num_tasks`` (else the ``num_tasks`` of reproduce's ``.built``, else 200).
    """
    manifest = folder / SPLITS_FILE
    if manifest.is_file():
        splits = json.loads(manifest.read_text(encoding="utf-8"))["splits"]
        return [(s["env_id"], dict(s["kwargs"])) for s in splits if s["role"] == "train"]
    if num_tasks is None:
        built = folder / ".built"
        recorded = json.loads(built.read_text(encoding="utf-8") or "{}") if built.is_file() else {}
        num_tasks = int(recorded.get("num_tasks") or 200)
    return [(s.env_id, split_kwargs(s, num_tasks)) for s in OFFLINE_SPLITS if s.role == "train"]


def _build_of(file: Path) -> Path | None:
    """The data build folder a file lies in (``DATA/train/`` or ``DATA/annotations/``), if any."""
    folder = file.resolve().parent
    if folder.name in ("train", "annotations") and (folder.parent / SPLITS_FILE).is_file():
        return folder.parent
    return None


def read_training(
    paths: Sequence[str | Path], *, num_tasks: int | None = None, builds: bool = False
) -> TrainingData:
    """Read training data: data build folders, folders of JSON-lines files, or files.

    A data build folder (``lumos-gym data build --out DIR``) gives its ``annotations/`` and
    ``train/`` files (never ``test/``) and its train splits; another folder gives its
    ``*.jsonl`` files. Annotation lines give their ids and tasks; record lines
    (``{"messages": [...]}``) their user and system messages. With ``builds``, a file that lies
    in a data build's ``train/`` or ``annotations/`` (beside its ``splits.json``) gives that
    build's train splits too, once, so that the entities of its worlds are compared.

    Raises:
        LumosGymError: a path that does not exist, or no file to read.
    """
    data = TrainingData()
    seen: set[Path] = set()
    for path in map(Path, paths):
        files, folder = _training_files(path)
        if folder is None and builds and path.is_file():
            folder = _build_of(path)
        if folder is not None and folder.resolve() not in seen:
            seen.add(folder.resolve())
            data.splits += build_splits(folder, num_tasks)
        for file in files:
            _read_lines(file, data)
            data.files.append(file)
    if not data.files:
        raise LumosGymError(f"no training file (*.jsonl) in {', '.join(map(str, paths))}")
    return data


def leakage_summary(report: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The counts a training card shows of a recorded report (``to_dict`` with its ``suite``)."""
    if not report:
        return None
    total = report.get("total") or {}
    return {"suite": report.get("suite"), "clean": bool(report.get("clean")),
            "test_tasks": total.get("test_tasks"), "shared_tasks": total.get("shared_tasks")}


def training_from_envs(
    envs: Sequence[tuple[str, Mapping[str, Any]]], *, limit: int | None = None
) -> TrainingData:
    """The tasks a run draws from envs as training data: each task's id and text, and its split.

    Expert iteration samples, and GRPO plays, the first ``limit`` tasks (all when ``None``) of
    each ``(env id, arguments)``; whatever such a run trains on comes from these tasks, so they
    are what to compare with the test tasks (their entities are read again from the splits).
    """
    data = TrainingData()
    for env_id, kwargs in envs:
        for task in _view(env_id, kwargs, lambda tasks: tasks[:limit]).tasks:
            data.ids.add(task.id)
            data.texts.add(normalise_text(task.question))
        data.splits.append((env_id, dict(kwargs)))
    return data


# -------------------------------------------------------------------------------- the check
@dataclass
class EnvLeakage:
    """What one test env shares with the training data.

    Attributes:
        env_id: the env.
        test_tasks: its test tasks.
        same_text: test tasks whose normalised text is in the training data.
        same_id: test tasks whose id an annotation has.
        train_tasks: training tasks of this env whose entities were compared (None: the env
            has no entity reader).
        entities: distinct entities of the test tasks.
        shared_entities: of those, the ones a training task has.
        world_names: names of the test world (WorldQA's page titles; 0 for other envs).
        shared_world_names: of those, the names of a training world.
        shared_tasks: test tasks shared with the training data (see the module docstring).
        examples: a few shared task ids, entities and names.
        near_duplicates: test tasks, not shared, that are near duplicates of a training task
            (see the module docstring).
        weak_near_duplicates: test tasks, neither shared nor near duplicates, with a weak match.
        near_examples: a few of each, ``test id ~ training id (key)``, near duplicates first.
    """

    env_id: str
    test_tasks: int
    same_text: int = 0
    same_id: int = 0
    train_tasks: int | None = None
    entities: int = 0
    shared_entities: int = 0
    world_names: int = 0
    shared_world_names: int = 0
    shared_tasks: int = 0
    examples: list[str] = field(default_factory=list)
    near_duplicates: int = 0
    weak_near_duplicates: int = 0
    near_examples: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Whether no task, entity or world name is shared (near duplicates aside)."""
        return not (self.shared_tasks or self.shared_entities or self.shared_world_names)

    def to_dict(self) -> dict[str, Any]:
        """Return the counts as JSON-ready values."""
        return {k: v for k, v in vars(self).items() if k != "env_id"} | {"clean": self.clean}


@dataclass
class LeakageReport:
    """The leakage check of one training set against one set of test tasks."""

    envs: list[EnvLeakage]
    files: list[str]
    annotations: int
    messages: int

    @property
    def clean(self) -> bool:
        """Whether the training data and the test tasks share no task and no entity."""
        return all(e.clean for e in self.envs)

    @property
    def near_duplicates(self) -> int:
        """The test tasks that are near duplicates of a training task (weak matches aside)."""
        return sum(e.near_duplicates for e in self.envs)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-ready values (what provenance records)."""
        total = {key: sum(getattr(e, key) for e in self.envs) for key in (
            "test_tasks", "same_text", "same_id", "shared_entities", "shared_world_names",
            "shared_tasks", "near_duplicates", "weak_near_duplicates")}
        return {"clean": self.clean, "files": self.files, "annotations": self.annotations,
                "messages": self.messages, "total": total,
                "envs": {e.env_id: e.to_dict() for e in self.envs}}

    def format(self) -> str:
        """Return the report as a table with a verdict line."""
        rows = []
        for e in self.envs:
            entities = "-" if e.train_tasks is None else f"{e.shared_entities} of {e.entities}"
            world = f"{e.shared_world_names} of {e.world_names}" if e.world_names else "-"
            rows.append([e.env_id, e.test_tasks, e.same_text, e.same_id,
                         "-" if e.train_tasks is None else e.train_tasks, entities, world,
                         e.shared_tasks, e.near_duplicates, e.weak_near_duplicates])
        total = self.to_dict()["total"]
        rows.append(["total", total["test_tasks"], total["same_text"], total["same_id"], "",
                     total["shared_entities"], total["shared_world_names"],
                     total["shared_tasks"], total["near_duplicates"],
                     total["weak_near_duplicates"]])
        head = (f"leakage: {len(self.files)} training file(s), {self.annotations} annotations, "
                f"{self.messages} distinct training messages, against the test tasks")
        lines = [head, table(["env", "test tasks", "same text", "same id", "train tasks",
                              "shared entities", "shared world names", "shared tasks",
                              "near duplicates", "weak"], rows)]
        if self.clean:
            lines.append("no leakage: the training data and the test tasks share no task and "
                         "no entity (same text alone is a shared template, not a shared task)")
        else:
            shown = "; ".join(f"{e.env_id}: {', '.join(e.examples)}" for e in self.envs
                              if not e.clean)
            lines.append(f"LEAKAGE: {total['shared_tasks']} shared task(s), "
                         f"{total['shared_entities']} shared entities, "
                         f"{total['shared_world_names']} shared world names ({shown})")
        for e in self.envs:
            if e.near_examples:
                lines.append(f"near duplicates of {e.env_id}: {e.near_duplicates}, weak "
                             f"{e.weak_near_duplicates}; e.g.")
                lines += [f"  {example}" for example in e.near_examples]
        lines.append(f"near duplicates (not shared tasks): {total['near_duplicates']}, and "
                     f"{total['weak_near_duplicates']} weak (one or two numbers; a walkthrough "
                     "from another room or of moves; a goal template)")
        return "\n".join(lines)


@dataclass
class _EnvView:
    """The tasks of one built env, each task's entities, and its world's names."""

    tasks: list[Task]
    entities: dict[str, set[str]]
    world: set[str]


def _view(env_id: str, kwargs: Mapping[str, Any], keep: Callable[[list[Task]], list[Task]]):
    env = gym.make(env_id, **dict(kwargs))
    try:
        base = env.unwrapped
        tasks = keep(list(base.tasks))
        reader = ENTITY_READERS.get(env_id)
        entities = {t.id: set(reader(base, t)) if reader else set() for t in tasks}
        world = WORLD_READERS[env_id](base) if env_id in WORLD_READERS else set()
    finally:
        env.close()
    return _EnvView(tasks, entities, world)


def _chosen(spec: EvalTasks) -> Callable[[list[Task]], list[Task]]:
    """The tasks an evaluation runs: the listed ids (else every task), the first ``limit``."""

    def keep(tasks: list[Task]) -> list[Task]:
        tasks = [t for t in tasks if t.id not in spec.exclude]
        if spec.task_ids is None:
            return tasks[: spec.limit]
        by_id = {t.id: t for t in tasks}
        return [by_id[t] for t in spec.task_ids if t in by_id][: spec.limit]

    return keep


def _train_view(training: TrainingData, env_id: str, log: Callable[[str], None]) -> _EnvView:
    """The annotated tasks of ``env_id``'s train splits (every task when no annotation)."""
    merged = _EnvView([], {}, set())

    def annotated(tasks: list[Task]) -> list[Task]:
        return [t for t in tasks if t.id in training.ids] if training.ids else tasks

    for split_env, kwargs in training.splits:
        if split_env != env_id:
            continue
        log(f"leakage: rebuilding the train split {env_id} {json.dumps(kwargs, sort_keys=True)}")
        view = _view(env_id, kwargs, annotated)
        merged.tasks += view.tasks
        merged.entities.update(view.entities)
        merged.world |= view.world
    return merged


def _compare_env(
    training: TrainingData, spec: EvalTasks, log: Callable[[str], None]
) -> EnvLeakage:
    """Compare one env's test tasks with the training data."""
    test = _view(spec.env_id, spec.kwargs, _chosen(spec))
    report = EnvLeakage(spec.env_id, len(test.tasks))
    texts = {t.id: normalise_text(t.question) for t in test.tasks}
    same_text = {i for i, text in texts.items() if training.has_text(text)}
    same_id = {t.id for t in test.tasks if t.id in training.ids}
    shared = set(same_id)
    train = _train_view(training, spec.env_id, log)
    if spec.env_id in ENTITY_READERS:
        by_text: dict[str, list[set[str]]] = {}
        for task in train.tasks:
            by_text.setdefault(normalise_text(task.question), []).append(train.entities[task.id])
        train_entities = set().union(*train.entities.values()) if train.entities else set()
        test_entities = set().union(*test.entities.values()) if test.entities else set()
        for task_id in same_text:
            mine = test.entities.get(task_id) or set()
            if not mine or any(mine & theirs for theirs in by_text.get(texts[task_id], ())):
                shared.add(task_id)
        common = sorted(test_entities & train_entities)
        names = sorted(test.world & train.world)
        report.train_tasks, report.entities = len(train.tasks), len(test_entities)
        report.shared_entities, report.world_names = len(common), len(test.world)
        report.shared_world_names = len(names)
        report.examples += common[:EXAMPLES] + names[:EXAMPLES]
    else:
        shared |= same_text
    report.same_text, report.same_id, report.shared_tasks = (
        len(same_text), len(same_id), len(shared))
    report.examples = sorted(shared)[:EXAMPLES] + report.examples
    _near_duplicates(report, test.tasks, shared, training, train.tasks)
    return report


def _near_duplicates(
    report: EnvLeakage, tests: Sequence[Task], shared: set[str], training: TrainingData,
    train_tasks: Sequence[Task],
) -> None:
    """Count the test tasks, not shared, that are near duplicates (or weak matches) of training.

    The training side: the tasks of the rebuilt train splits, and every annotation's task and
    answer (their number keys).
    """
    index: dict[tuple[str, Any], str] = {}
    for task in train_tasks:
        for key in near_keys(task):
            index.setdefault((key.kind, key.value), task.id)
    for task_id, question, answer in training.problems:
        for key in _problem_keys(question, answer):
            index.setdefault((key.kind, key.value), task_id)
    near: list[str] = []
    weak: list[str] = []
    for task in tests:
        if task.id in shared:
            continue
        found = [(key, index[key.kind, key.value]) for key in near_keys(task)
                 if (key.kind, key.value) in index]
        if not found:
            continue
        key, other = max(found, key=lambda match: match[0].strong)  # a strong key first
        (near if key.strong else weak).append(f"{task.id} ~ {other} ({key.shown})")
    report.near_duplicates, report.weak_near_duplicates = len(near), len(weak)
    report.near_examples = near[:NEAR_EXAMPLES] + [f"weak: {w}" for w in weak[:NEAR_EXAMPLES]]


def check_leakage(
    training: TrainingData, tests: Sequence[EvalTasks], *,
    log: Callable[[str], None] = lambda line: None,
) -> LeakageReport:
    """Compare the training data with the test tasks of every env (see the module docstring).

    Args:
        training: the training data (:func:`read_training`).
        tests: the test tasks of each env (:func:`eval_tasks` of a suite's entries).
        log: where progress lines go (an env's train split rebuilt).
    """
    envs = [_compare_env(training, spec, log) for spec in tests]
    return LeakageReport(envs, [str(f) for f in training.files], len(training.ids),
                         len(training.index))


__all__ = [
    "ENTITY_READERS",
    "EnvLeakage",
    "EvalTasks",
    "LEAKAGE_FILE",
    "LeakageReport",
    "NEAR_GAME_ACTIONS",
    "NEAR_NUMBERS",
    "NUMBER_KEY_TYPES",
    "NearKey",
    "TextIndex",
    "TrainingData",
    "WORLD_READERS",
    "build_splits",
    "check_leakage",
    "eval_tasks",
    "leakage_summary",
    "near_keys",
    "normalise_text",
    "number_key",
    "opening_room",
    "read_training",
    "training_from_envs",
    "walkthrough",
]
