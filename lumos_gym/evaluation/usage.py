"""What a run's model calls took: requests, tokens, cost and cache hits per role (``run.json``).

Every role's backend of an evaluation is wrapped in a
:class:`~lumos_gym.models.caching.CachingBackend` (:func:`counted_backends`), which counts the
requests it sends and the tokens of the completions it receives; with ``--cache DIR`` it also
answers repeated requests from the cache in ``DIR``, shared by every process of the run (Ray
workers, shards). :func:`usage_blocks` turns the counts into ``run.json``'s ``usage`` block
(and ``cache`` block), with a cost when prices are given; :func:`usage_line` is the one line
``lumos-gym evaluate`` prints about them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lumos_gym.errors import EvaluationError
from lumos_gym.models.base import Backend
from lumos_gym.models.caching import CachingBackend, CompletionCache, Usage
from lumos_gym.models.factory import BackendSet

_SENT = ("requests", "prompt_tokens", "completion_tokens")
_SAVED = ("hits", "misses", "saved_prompt_tokens", "saved_completion_tokens")


def check_prices(prices: Sequence[float] | None) -> tuple[float, float] | None:
    """Return ``prices`` as ``(prompt, completion)`` USD per million tokens, checked.

    Raises:
        EvaluationError: not two numbers, or a negative or non-finite one.
    """
    if prices is None:
        return None
    try:
        prompt, completion = (float(p) for p in prices)
    except (TypeError, ValueError):
        raise EvaluationError(f"--prices takes two numbers, IN,OUT (USD per million prompt and "
                              f"completion tokens); got {prices!r}") from None
    for value in (prompt, completion):
        if not 0 <= value < float("inf"):
            raise EvaluationError(f"--prices must be two non-negative numbers; got {value:g}")
    return prompt, completion


def open_cache(folder: str | Path | None) -> CompletionCache | None:
    """The request cache in ``folder``, shared by the processes of a run (None: no cache).

    Raises:
        DataError: ``folder`` is a file, or one of its cache files is not a cache.
    """
    return CompletionCache(folder, folder=True) if folder is not None else None


def counted_backends(built: BackendSet, cache: CompletionCache | None) -> BackendSet:
    """``built`` with every role's backend in a counting (and, with ``cache``, caching) wrapper.

    Each role gets a wrapper of its own, so that its requests are counted apart; roles on one
    backend still batch together (:meth:`CachingBackend.batch_group`). Sampled requests are
    cached too, under their seeds. The backends ``built`` owns stay its own (closing the set
    closes them once more, which backends allow).
    """
    counted = BackendSet()
    counted.owned = list(built.owned)
    for role, backend in built.items():
        counted[role] = CachingBackend(backend, cache, sampled=True)
    return counted


def role_usage(backends: Mapping[str, Backend]) -> dict[str, Usage]:
    """The counts of each role whose backend :func:`counted_backends` wrapped."""
    return {role: backend.usage for role, backend in sorted(backends.items())
            if isinstance(backend, CachingBackend)}


def add_usage(total: dict[str, Usage], more: Mapping[str, Mapping[str, int]]) -> None:
    """Add ``more`` (role → :class:`Usage` fields, a Ray worker's counts) to ``total``."""
    for role, counts in more.items():
        total.setdefault(role, Usage()).add(Usage(**dict(counts)))


def _cost(prompt_tokens: int, completion_tokens: int, prices: tuple[float, float]) -> float:
    return round((prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1e6, 6)


def _dollars(amount: float) -> str:
    """``amount`` as ``$1,234.5``, to the micro-dollar: ``$0.000013``, ``$0``."""
    return "$" + f"{amount:,.6f}".rstrip("0").rstrip(".")


def usage_blocks(
    usage: Mapping[str, Usage], *, cache: str | Path | None = None,
    prices: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """``run.json``'s ``usage`` block (and its ``cache`` block, with a cache) for these counts.

    Args:
        usage: each role's counts.
        cache: the cache folder as given (no ``cache`` block without it).
        prices: USD per million prompt and completion tokens: adds ``cost_usd`` to the usage
            (per role too) and ``saved_cost_usd`` to the cache block.
    """
    total = Usage()
    for counts in usage.values():
        total.add(counts)

    def sent(counts: Usage) -> dict[str, Any]:
        row: dict[str, Any] = {k: getattr(counts, k) for k in _SENT}
        if prices is not None:
            row["cost_usd"] = _cost(counts.prompt_tokens, counts.completion_tokens, prices)
        return row

    block: dict[str, Any] = {"usage": {
        **sent(total), "roles": {role: sent(counts) for role, counts in usage.items()},
    }}
    if prices is not None:
        block["usage"]["prices_usd_per_million"] = {"prompt": prices[0],
                                                    "completion": prices[1]}
    if cache is not None:
        saved: dict[str, Any] = {"dir": str(cache), **{k: getattr(total, k) for k in _SAVED}}
        if prices is not None:
            saved["saved_cost_usd"] = _cost(total.saved_prompt_tokens,
                                            total.saved_completion_tokens, prices)
        saved["roles"] = {role: {k: getattr(c, k) for k in _SAVED} for role, c in usage.items()}
        block["cache"] = saved
    return block


def usage_line(usage: Mapping[str, Usage], *, cache: bool,
               prices: tuple[float, float] | None = None, seconds: float | None = None) -> str:
    """One line about the model calls.

    For example ``model calls: 412 sent, 0 from cache; tokens 51,200 in / 8,340 out``, then
    the rate over the episodes' ``seconds`` (``59,540 tokens in 100.0 s: 595 tokens/s, 83
    written/s``), the cost with ``prices``, and what the cache saved when it answered any.
    """
    total = Usage()
    for counts in usage.values():
        total.add(counts)
    line = f"model calls: {total.requests:,} sent"
    if cache:
        line += f", {total.hits:,} from cache"
    line += f"; tokens {total.prompt_tokens:,} in / {total.completion_tokens:,} out"
    if seconds and seconds > 0 and total.requests:
        both = total.prompt_tokens + total.completion_tokens
        line += (f"; {both:,} tokens in {seconds:.1f} s: {both / seconds:,.0f} tokens/s, "
                 f"{total.completion_tokens / seconds:,.0f} written/s")
    if prices is not None:
        line += f"; cost {_dollars(_cost(total.prompt_tokens, total.completion_tokens, prices))}"
    if cache and total.hits:
        line += (f"; the cache saved {total.saved_prompt_tokens:,} in / "
                 f"{total.saved_completion_tokens:,} out")
        if prices is not None:
            saved = _cost(total.saved_prompt_tokens, total.saved_completion_tokens, prices)
            line += f" ({_dollars(saved)})"
    return line


def usage_counts(usage: Mapping[str, Usage]) -> dict[str, dict[str, int]]:
    """``usage`` as plain data (a Ray worker sends it so)."""
    return {role: asdict(counts) for role, counts in usage.items()}
