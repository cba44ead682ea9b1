"""Token capture: the token ids and log-probabilities of every module call of an episode.

With ``record_tokens`` the runner asks each backend for the token trace of every call
(:class:`~lumos_gym.models.base.TokenTrace`) and keeps one *call entry* per module call on the
episode record (``EpisodeRecord.tokens``); ``lumos-gym evaluate --record-tokens`` writes them to
``tokens.jsonl`` beside ``episodes.jsonl``, one line per episode, ``{"key": ..., "calls":
[...]}``. The episode file keeps its layout, so every reader of results is unchanged.

A call entry is compact:

* ``turn``: the index in the episode's ``turns`` of the turn that holds the call's output;
  ``role``: the role asked;
* ``completion_ids`` and ``logprobs`` (rounded to :data:`LOGPROB_DIGITS` decimals);
  ``loss_mask`` only when some completion token is not the model's;
* ``prompt_ids``: the prompt's tokens, except that a prompt which begins with an earlier
  call's prompt and completion (Lumos' planner re-reads its whole conversation each round)
  stores only the rest, and ``prefix: [j, n]``: its first ``n`` tokens are the first ``n``
  of call ``j``'s prompt followed by its completion.

:func:`expand_calls` restores the full ``prompt_ids`` of every call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lumos_gym.models.base import TokenTrace

#: Decimals kept of each log-probability (1e-5 nats: far below what training can tell apart).
LOGPROB_DIGITS = 5
#: The shortest shared prefix stored as a reference rather than as ids.
MIN_SHARED = 8
#: The token sidecar of a results folder.
TOKENS_FILE = "tokens.jsonl"


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def call_entry(
    turn: int, role: str, trace: TokenTrace, earlier: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Return the compact entry of one call (see the module docstring).

    Args:
        turn: the index of the call's turn in the episode record.
        role: the role asked.
        trace: the call's tokens.
        earlier: the episode's earlier entries, *expanded* (full ``prompt_ids``), whose
            prompt and completion this prompt may start with.
    """
    prompt = list(trace.prompt_ids)
    best, shared = -1, 0
    for j, entry in enumerate(earlier):
        n = _common(prompt, [*entry["prompt_ids"], *entry["completion_ids"]])
        if n > shared:
            best, shared = j, n
    row: dict[str, Any] = {"turn": turn, "role": role}
    if shared >= MIN_SHARED:
        row["prefix"] = [best, shared]
        row["prompt_ids"] = prompt[shared:]
    else:
        row["prompt_ids"] = prompt
    row["completion_ids"] = list(trace.completion_ids)
    row["logprobs"] = [round(x, LOGPROB_DIGITS) for x in trace.logprobs]
    if trace.loss_mask is not None:
        row["loss_mask"] = list(trace.loss_mask)
    return row


def compact_calls(calls: Iterable[tuple[int, str, TokenTrace]]) -> list[dict[str, Any]]:
    """Return the compact entries of an episode's calls, ``(turn, role, trace)`` in order."""
    entries: list[dict[str, Any]] = []
    expanded: list[dict[str, Any]] = []
    for turn, role, trace in calls:
        entries.append(call_entry(turn, role, trace, expanded))
        expanded.append({"prompt_ids": list(trace.prompt_ids),
                         "completion_ids": list(trace.completion_ids)})
    return entries


def expand_calls(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the entries with their full ``prompt_ids`` (``prefix`` resolved and dropped).

    Raises:
        ValueError: a ``prefix`` names a later call or runs past the call it names.
    """
    out: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        row = {k: v for k, v in entry.items() if k != "prefix"}
        if "prefix" in entry:
            j, n = (int(x) for x in entry["prefix"])
            if not 0 <= j < i:
                raise ValueError(f"call {i}: its prefix names call {j}")
            source = [*out[j]["prompt_ids"], *out[j]["completion_ids"]]
            if n > len(source):
                raise ValueError(f"call {i}: a prefix of {n} tokens from a call of {len(source)}")
            row["prompt_ids"] = source[:n] + list(entry["prompt_ids"])
        out.append(row)
    return out


def trace_of(entry: Mapping[str, Any]) -> TokenTrace:
    """Return the :class:`TokenTrace` of an expanded entry."""
    mask = entry.get("loss_mask")
    return TokenTrace(tuple(entry["prompt_ids"]), tuple(entry["completion_ids"]),
                      tuple(entry["logprobs"]), tuple(mask) if mask is not None else None)


def read_tokens(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Read a ``tokens.jsonl``: episode key → its expanded call entries.

    A torn last line (a killed run) is skipped; a later line of an episode (a resumed run that
    played it again) replaces an earlier one.
    """
    found: dict[str, list[dict[str, Any]]] = {}
    path = Path(path)
    if not path.is_file():
        return found
    lines = path.read_text(encoding="utf-8").split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            found[str(row["key"])] = expand_calls(row["calls"])
        except (ValueError, KeyError, TypeError):
            if n == len(lines):
                continue  # the torn last line of a killed run
            raise
    return found


__all__ = [
    "LOGPROB_DIGITS",
    "TOKENS_FILE",
    "call_entry",
    "compact_calls",
    "expand_calls",
    "read_tokens",
    "trace_of",
]
