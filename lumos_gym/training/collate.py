"""Batches of encoded examples: packed rows that never attend across records, or padded rows.

Packing puts several examples into one row of at most ``max_length`` tokens (first fit, longest
first) and gives each its own ``position_ids`` starting at 0. The collator passes no
``attention_mask``: transformers (5.x, ``masking_utils.find_packed_sequence_indices``) then
reads the restarts in ``position_ids`` and builds a block-diagonal causal mask, so a token sees
only the tokens of its own record, for eager, SDPA and flash attention alike. The first token of
each packed example carries no loss, so no record learns to predict the next one's start.
transformers looks for packed sequences only when no KV cache is in use; the Trainer turns
``use_cache`` off while training, and a test checks a real trainer batch attends per record.

Without packing, :class:`PaddedCollator` pads each batch to its longest row (the trainer then
groups records of similar length into batches to keep the padding small).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lumos_gym.training.data import IGNORE_INDEX, Example


@dataclass(frozen=True)
class PackedRow:
    """Several examples in one row.

    Attributes:
        input_ids: the examples' tokens, one after another.
        labels: their labels, ``-100`` on each example's first token.
        position_ids: positions restarting at 0 at each example.
        examples: how many examples the row holds.
    """

    input_ids: list[int]
    labels: list[int]
    position_ids: list[int]
    examples: int


def pack_examples(examples: Sequence[Example], max_length: int) -> list[PackedRow]:
    """Pack examples into rows of at most ``max_length`` tokens (first fit decreasing).

    The result depends only on the examples and their order (ties keep input order), so a
    resumed run packs the same rows.
    """
    order = sorted(range(len(examples)), key=lambda i: -len(examples[i].input_ids))
    rows: list[list[int]] = []
    room: list[int] = []
    for i in order:
        size = len(examples[i].input_ids)
        for r, free in enumerate(room):
            if size <= free:
                rows[r].append(i)
                room[r] -= size
                break
        else:
            rows.append([i])
            room.append(max_length - size)
    packed = []
    for members in rows:
        ids: list[int] = []
        labels: list[int] = []
        positions: list[int] = []
        for i in sorted(members):
            example = examples[i]
            ids.extend(example.input_ids)
            labels.append(IGNORE_INDEX)
            labels.extend(example.labels[1:])
            positions.extend(range(len(example.input_ids)))
        packed.append(PackedRow(ids, labels, positions, len(members)))
    return packed


def _right_padded(rows: Sequence[Mapping[str, Any]], key: str, fill: Any) -> torch.Tensor:
    """Stack ``row[key]`` of every row, right-padded to the longest ``input_ids``.

    ``fill`` is a value, or a function of the gap's length returning the padding list.
    """
    width = max(len(row["input_ids"]) for row in rows)
    stacked = []
    for row in rows:
        gap = width - len(row["input_ids"])
        tail = fill(gap) if callable(fill) else [fill] * gap
        stacked.append(list(row[key]) + tail)
    return torch.tensor(stacked, dtype=torch.long)


class PackedCollator:
    """Collate packed rows: right-pad with a separate position run and no attention mask.

    Padding tokens form a block of their own (positions restart at 0), so real tokens never
    attend to them, and carry no loss.
    """

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """Stack rows into ``input_ids``, ``labels`` and ``position_ids`` tensors."""
        return {
            "input_ids": _right_padded(rows, "input_ids", self.pad_id),
            "labels": _right_padded(rows, "labels", IGNORE_INDEX),
            "position_ids": _right_padded(rows, "position_ids", lambda gap: list(range(gap))),
        }


class PaddedCollator:
    """Collate single examples: right-pad to the longest row, with an attention mask."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """Stack rows into ``input_ids``, ``labels`` and ``attention_mask`` tensors."""
        ids = _right_padded(rows, "input_ids", self.pad_id)
        lengths = torch.tensor([len(row["input_ids"]) for row in rows])
        return {
            "input_ids": ids,
            "labels": _right_padded(rows, "labels", IGNORE_INDEX),
            "attention_mask": (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long(),
        }


class RowDataset(torch.utils.data.Dataset):
    """A list of rows (dicts of token lists) as a torch dataset."""

    def __init__(self, rows: Sequence[Mapping[str, list[int]]]) -> None:
        self.rows = list(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Mapping[str, list[int]]:
        return self.rows[index]


def rows_for_training(
    examples: Sequence[Example], *, pack: bool, max_length: int
) -> list[dict[str, list[int]]]:
    """The dataset rows: packed rows, or one row per example."""
    if pack:
        return [
            {"input_ids": r.input_ids, "labels": r.labels, "position_ids": r.position_ids}
            for r in pack_examples(examples, max_length)
        ]
    return [{"input_ids": e.input_ids, "labels": e.labels} for e in examples]


def padding_fraction(rows: Sequence[Mapping[str, list[int]]], batch_size: int) -> float:
    """The share of token slots that are padding when ``rows`` are batched in order."""
    slots = real = 0
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        width = max(len(r["input_ids"]) for r in batch)
        slots += width * len(batch)
        real += sum(len(r["input_ids"]) for r in batch)
    return 1 - real / slots if slots else 0.0


__all__ = [
    "PackedCollator",
    "PackedRow",
    "PaddedCollator",
    "RowDataset",
    "pack_examples",
    "padding_fraction",
    "rows_for_training",
]
