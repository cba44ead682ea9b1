"""Training records: read and check export files, encode them with loss on assistant text only.

A record is one JSON line ``{"dataset": ..., "id": ..., "messages": [{"role", "content"}...]}``
(docs/lumos-format.md §1.1; ``lumos-gym export`` writes them). Every file is read and checked in
full before a model is loaded, so a bad line is reported with its file and line number at once,
never an hour into a run.

Encoding follows open-instruct's ``encode_with_messages_format`` as Lumos trained with it:
the Tulu framing of :func:`lumos_gym.prompts.training_segments`, tokenized once without
special tokens, truncated to ``max_length``, labels ``-100`` on every token that starts outside
an assistant span; a record with no trained token left is dropped and counted.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym import prompts
from lumos_gym.training.config import TrainingError

IGNORE_INDEX = -100
"""The label of a token that carries no loss."""

_ROLES = ("system", "user", "assistant")
_MAX_REPORTED = 5


@dataclass(frozen=True)
class Record:
    """One training conversation.

    Attributes:
        id: the record's id (``file:line`` when it has none).
        messages: the conversation.
        source: ``path:line`` where it was read.
        dataset: the record's ``dataset`` (``maths``, ``webshop``, ...: where its annotation
            came from), empty when it names none.
    """

    id: str
    messages: tuple[dict[str, str], ...]
    source: str
    dataset: str = ""


@dataclass(frozen=True)
class Example:
    """One encoded record.

    Attributes:
        input_ids: the token ids.
        labels: the ids to predict, ``-100`` where no loss is taken.
        truncated: whether ``max_length`` cut the record.
    """

    input_ids: list[int]
    labels: list[int]
    truncated: bool = False

    @property
    def trained_tokens(self) -> int:
        """The number of tokens that carry loss."""
        return sum(1 for label in self.labels if label != IGNORE_INDEX)


@dataclass
class EncodeStats:
    """What encoding did to a set of records.

    Attributes:
        records: records read.
        kept: examples kept.
        truncated: kept examples cut at ``max_length``.
        dropped_no_target: records with no assistant token left after truncation.
        tokens: tokens in the kept examples.
        trained_tokens: tokens that carry loss.
        longest: the longest record before truncation, in tokens.
        datasets: records read per ``dataset`` (``""``: records naming none), so that a
            model's card says which task families it saw.
    """

    records: int = 0
    kept: int = 0
    truncated: int = 0
    dropped_no_target: int = 0
    tokens: int = 0
    trained_tokens: int = 0
    longest: int = 0
    dropped_ids: list[str] = field(default_factory=list)
    datasets: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The stats as JSON-ready data (the first dropped ids only)."""
        data = dict(self.__dict__)
        data["dropped_ids"] = self.dropped_ids[:20]
        data["datasets"] = dict(sorted(self.datasets.items()))
        return data


# ------------------------------------------------------------------------------------ reading
def _problem(message: Any, index: int) -> str | None:
    if not isinstance(message, Mapping):
        return f"message {index} is not an object"
    role, content = message.get("role"), message.get("content")
    if role not in _ROLES:
        return f"message {index} has role {role!r}; roles are {', '.join(_ROLES)}"
    if not isinstance(content, str):
        return f"message {index} has no text content"
    return None


def check_record(row: Any) -> str | None:
    """Say what is wrong with one parsed JSON line, or ``None`` when it is a training record."""
    if not isinstance(row, Mapping):
        return "a line must be a JSON object"
    messages = row.get("messages")
    if messages is None:
        if ("subgoals" in row or "subgoal_plan" in row) and ("task" in row or "question" in row):
            return ("this is a unified annotation, not a training record; export it first: "
                    "lumos-gym export ANNOTATIONS --format plan-iterative --out FILE")
        if "task_id" in row and "metrics" in row:
            return "this is an evaluation result, not a training record"
        return f"no 'messages' list (keys: {', '.join(sorted(map(str, row))) or 'none'})"
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    for i, message in enumerate(messages):
        problem = _problem(message, i)
        if problem:
            return problem
    body = messages[1:] if messages[0]["role"] == "system" else messages
    for i, message in enumerate(body):
        expected = "user" if i % 2 == 0 else "assistant"
        if message["role"] != expected:
            return f"turns must alternate user, assistant...; turn {i} is {message['role']!r}"
    if not any(m["role"] == "assistant" for m in body):
        return "no assistant message: nothing to learn"
    return None


def _decodes(head: bytes) -> bool:
    """Say whether ``head`` (maybe cut inside a character) is UTF-8 text."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.reason == "unexpected end of data"
    return True


def read_records(paths: Sequence[str | Path]) -> list[Record]:
    """Read and check every line of the training files.

    Raises:
        TrainingError: a file is missing or empty, or a line is not a training record; the
            message names up to five bad lines (``file:line: what``) and how many there are.
    """
    records: list[Record] = []
    problems: list[str] = []
    count = 0
    for raw in paths:
        path = Path(raw)
        if not path.is_file():
            raise TrainingError(
                f"training file {str(path)!r} does not exist; build one with `lumos-gym export` "
                "or `lumos-gym data build`"
            )
        with open(path, "rb") as f:
            first = f.readline(8192)
        if b"\0" in first or not _decodes(first):  # an image, an archive: one line says so
            raise TrainingError(
                f"training file {str(path)!r} is not text; training files are JSON lines "
                "(lumos-gym export or lumos-gym data build)"
            )
        before = len(records)
        with open(path, "rb") as f:  # each line decoded alone: one not UTF-8 is a bad line
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    row = json.loads(line.decode("utf-8"))
                except json.JSONDecodeError as e:
                    problem: str | None = f"not JSON ({e.msg} at column {e.colno})"
                except UnicodeDecodeError as e:
                    problem = f"not UTF-8 text (byte {line[e.start]:#04x} at column {e.start + 1})"
                else:
                    problem = check_record(row)
                if problem:
                    count += 1
                    if len(problems) < _MAX_REPORTED:
                        problems.append(f"{where}: {problem}")
                    continue
                messages = tuple(
                    {"role": m["role"], "content": m["content"]} for m in row["messages"]
                )
                dataset = row.get("dataset")
                records.append(Record(str(row.get("id") or where), messages, where,
                                      dataset if isinstance(dataset, str) else ""))
        if len(records) == before and not count:
            raise TrainingError(f"training file {str(path)!r} holds no record")
    if problems:
        shown = f", the first {len(problems)} of them" if count > len(problems) else ""
        raise TrainingError(
            f"{count} line(s) are not training records{shown}:\n  " + "\n  ".join(problems)
        )
    return records


def data_fingerprint(paths: Sequence[str | Path]) -> dict[str, str]:
    """The SHA-256 of each training file, for the run's provenance."""
    digests = {}
    for raw in paths:
        digest = hashlib.sha256()
        with open(raw, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digests[str(raw)] = digest.hexdigest()
    return digests


def split_records(
    records: Sequence[Record], *, eval_fraction: float, seed: int, max_records: int | None = None
) -> tuple[list[Record], list[Record]]:
    """Shuffle with ``seed``, keep ``max_records``, and hold out ``eval_fraction`` for eval.

    The held-out slice has at least one record when ``eval_fraction`` is positive and there
    are at least two records.
    """
    order = list(records)
    random.Random(seed).shuffle(order)
    if max_records is not None:
        order = order[:max_records]
    held = 0
    if eval_fraction > 0 and len(order) >= 2:
        held = max(1, round(len(order) * eval_fraction))
    return order[held:], order[:held]


# ----------------------------------------------------------------------------------- encoding
def _span_labels(
    tokenizer: Any, pieces: Sequence[tuple[str, bool]]
) -> tuple[list[int], list[bool]]:
    """Token ids of the joined pieces and, per token, whether it starts in a trained piece."""
    text = "".join(p for p, _ in pieces)
    starts: list[int] = []  # where each piece starts, for a binary search per token
    start = 0
    for piece, _ in pieces:
        starts.append(start)
        start += len(piece)

    def in_trained(offset: int) -> bool:
        return pieces[max(0, bisect.bisect_right(starts, offset) - 1)][1]

    if getattr(tokenizer, "is_fast", False):
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = list(encoded["input_ids"])
        flags = [in_trained(a) for a, _ in encoded["offset_mapping"]]
        return ids, flags
    # slow tokenizers have no offsets: tokenize growing prefixes, as open-instruct does
    ids, flags = [], []
    prefix = ""
    for piece, trained in pieces:
        prefix += piece
        prefix_ids = tokenizer.encode(prefix, add_special_tokens=False)
        flags.extend([trained] * (len(prefix_ids) - len(ids)))
        ids = prefix_ids
    return ids, flags[: len(ids)]


def encode_record(
    messages: Sequence[Mapping[str, str]], tokenizer: Any, *, max_length: int, eos: str
) -> tuple[Example, int]:
    """Encode one conversation; return the example and its length before truncation."""
    pieces = prompts.training_segments(messages, eos)
    ids, flags = _span_labels(tokenizer, pieces)
    full_length = len(ids)
    ids, flags = ids[:max_length], flags[:max_length]
    labels = [token if trained else IGNORE_INDEX for token, trained in zip(ids, flags, strict=True)]
    return Example(ids, labels, truncated=full_length > max_length), full_length


def encode_records(
    records: Iterable[Record], tokenizer: Any, *, max_length: int, eos: str
) -> tuple[list[Example], EncodeStats]:
    """Encode records, dropping (and counting) those with no trained token left."""
    stats = EncodeStats()
    examples: list[Example] = []
    for record in records:
        stats.records += 1
        stats.datasets[record.dataset] = stats.datasets.get(record.dataset, 0) + 1
        example, full_length = encode_record(
            record.messages, tokenizer, max_length=max_length, eos=eos
        )
        stats.longest = max(stats.longest, full_length)
        if example.trained_tokens == 0:
            stats.dropped_no_target += 1
            stats.dropped_ids.append(record.id)
            continue
        stats.kept += 1
        stats.truncated += example.truncated
        stats.tokens += len(example.input_ids)
        stats.trained_tokens += example.trained_tokens
        examples.append(example)
    return examples, stats


__all__ = [
    "IGNORE_INDEX",
    "EncodeStats",
    "Example",
    "Record",
    "check_record",
    "data_fingerprint",
    "encode_record",
    "encode_records",
    "read_records",
    "split_records",
]
