"""Batches of the ``hf`` backend, and the text of a completion.

Requests grouped and left-padded into rows, the seed of a batch, the stop criteria that end
rows, and the log-probabilities of the picked tokens.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import torch
from transformers import LogitsProcessor, StoppingCriteria

from lumos_gym.models.base import GenerationRequest, cut_at_stop, is_cancelled

END_MARKER = "</s>"
"""Lumos' end-of-turn marker. SmolLM2's tokenizer reads it as plain text, so a model trained on
Lumos data writes it out; a completion never ends with it."""

_TRAILING_END_MARKER = re.compile(re.escape(END_MARKER) + r"\s*$")


# -- batching and text -----------------------------------------------------------------------------


def plan_batches(
    keys: Sequence[Hashable], lengths: Sequence[int], batch_size: int
) -> list[list[int]]:
    """Split request indices into batches that share a key, longest requests first.

    Groups keep the order in which their keys first appear; within a group the sort is stable.

    Args:
        keys: each request's generation settings (requests batch only with equal keys).
        lengths: each request's prompt length.
        batch_size: the most requests in one batch.

    Returns:
        Batches of indices into the requests; together they hold every index once.
    """
    groups: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    batches: list[list[int]] = []
    for members in groups.values():
        members.sort(key=lambda index: -lengths[index])
        batches.extend(members[i : i + batch_size] for i in range(0, len(members), batch_size))
    return batches


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token rows into ``(input_ids, attention_mask)``, both ``(len(rows), width)``."""
    width = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            input_ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            attention_mask[i, width - len(row) :] = 1
    return input_ids, attention_mask


def trim_completion(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before its earliest stop string, then drop a trailing ``</s>``.

    Returns:
        The text, and whether a stop string was found.
    """
    text, found = cut_at_stop(text, stop)
    return _TRAILING_END_MARKER.sub("", text), found


def batch_seed(seeds: Sequence[int]) -> int:
    """One sampling seed for a batch: a lone request's own seed, else a mix of all of them."""
    if len(set(seeds)) == 1:
        return seeds[0]
    return zlib.crc32(",".join(map(str, seeds)).encode())


@contextlib.contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch's generators for the block and restore their state afterwards."""
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    else:
        devices = []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


class StopOnStrings(StoppingCriteria):
    """Ends each row of a batch once its generated text holds one of the stop strings.

    Only the last tokens of each row are decoded per step: enough to hold the longest stop
    string even when a character spans four byte tokens. A row that produced an end-of-sequence
    token is done too (generate stops it as well), and the batch ends when every row is done.

    A row whose request was cancelled (:attr:`GenerationRequest.cancelled`) is done at the next
    step as well, so a batch whose callers all went away ends there.

    Attributes:
        stopped_at: per row, how many tokens it had generated when its stop string appeared
            (``None`` while it has not).
        cancelled: per row, whether it was stopped because its request was cancelled.
    """

    def __init__(
        self,
        tokenizer: Any,
        stop: Sequence[str],
        *,
        prompt_width: int,
        rows: int,
        eos_ids: frozenset[int],
        requests: Sequence[GenerationRequest] = (),
    ) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.prompt_width = prompt_width
        self.eos_ids = eos_ids
        self.window = 4 * max((len(s) for s in self.stop), default=1) + 8
        self.done = [False] * rows
        self.stopped_at: list[int | None] = [None] * rows
        self.cancelled = [False] * rows
        self.requests = list(requests)

    @property
    def needed(self) -> bool:
        """Whether generate needs this criterion (stop strings, or requests that can cancel)."""
        return bool(self.stop) or any(r.cancelled is not None for r in self.requests)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        """Mark the rows whose new text holds a stop string; return which rows are done."""
        generated = input_ids.shape[1] - self.prompt_width
        start = max(self.prompt_width, input_ids.shape[1] - self.window)
        tails = input_ids[:, start:].tolist()
        for row, tail in enumerate(tails):
            if self.done[row]:
                continue
            if tail and tail[-1] in self.eos_ids:
                self.done[row] = True
                continue
            if row < len(self.requests) and is_cancelled(self.requests[row]):
                self.done[row] = self.cancelled[row] = True
                self.stopped_at[row] = generated
                continue
            if not self.stop:
                continue
            text = self.tokenizer.decode(tail, skip_special_tokens=True)
            if any(s in text for s in self.stop):
                self.done[row] = True
                self.stopped_at[row] = generated
        return torch.tensor(self.done, dtype=torch.bool, device=input_ids.device)


# -- log-probabilities ----------------------------------------------------------------------------


class ChosenLogprobs(LogitsProcessor):
    """Records the log-probability of each token generate picks, at temperature 1.

    transformers runs a custom processor before its sampling warpers (temperature, top-k), so
    the scores seen here are the model's own logits. Each call keeps one step's
    log-softmax; the next call (whose ``input_ids`` end with the token picked from it) and
    :meth:`finish` read the picked token's entry. Only one step's row per sequence is held.
    """

    def __init__(self) -> None:
        self.pending: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Read the token picked from the last step's row; keep this step's; pass ``scores`` on."""
        if self.pending is not None:
            self.steps.append(self._gather(input_ids[:, -1]))
        self.pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def _gather(self, chosen: torch.Tensor) -> torch.Tensor:
        assert self.pending is not None
        return self.pending.gather(1, chosen.to(self.pending.device)[:, None])[:, 0].cpu()

    def finish(self, generated: torch.Tensor) -> list[list[float]]:
        """Per row, the log-probability of each generated token (``generated``: new ids only)."""
        if self.pending is not None and generated.shape[1] > len(self.steps):
            self.steps.append(self._gather(generated[:, len(self.steps)]))
            self.pending = None
        if not self.steps:
            return [[] for _ in range(generated.shape[0])]
        return torch.stack(self.steps, dim=1).tolist()
