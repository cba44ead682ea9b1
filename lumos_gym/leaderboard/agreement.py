"""How far two runs of the same tasks wrote the same thing: module outputs and whole episodes.

Two runs of one agent that differ only in how its models run (another backend, engine, dtype
or batch size) should write the same episodes under greedy decoding. The scores alone cannot
show that: two runs can score alike and write different episodes. This module counts, over the
episodes the two runs share (paired as :func:`~lumos_gym.leaderboard.stats.pair_records` pairs
them):

* **calls compared**: the module calls that saw the same prompt in both runs. A record keeps
  no prompts unless the run was asked to (``--keep-prompts``), so a call is taken to have seen
  the same prompt when everything before it in its episode was the same: the first call of an
  episode, and every call up to the first turn where the two runs differ (an output, an action
  or an observation: a tool that answered differently changes the next prompt too). Where both
  turns do hold their prompt, the prompts are compared instead.
* **same outputs**: of those, the calls that wrote the same text.
* **same episodes**: the paired episodes whose turns are all equal, with the same status.

Gold turns (a counterfactual agent's gold subgoal or grounding, ``"gold": true``) are not
module calls: they are compared as turns and not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.leaderboard.stats import Pairing

#: What the agreement counts, for the notes under its tables.
AGREEMENT_NOTE = (
    "A call is compared when it saw the same prompt in both runs: its turn's prompts where both "
    "runs kept them, else every turn before it in its episode equal (outputs, actions and "
    "observations); a call after an episode's first difference sees another prompt and is not "
    "counted. Same episodes: every turn and the status equal."
)


@dataclass
class Agreement:
    """The agreement of two runs over some paired episodes.

    Attributes:
        episodes: paired episodes.
        same_episodes: those whose turns and status are all equal.
        calls: role → module calls that saw the same prompt in both runs.
        same: role → of those, the calls that wrote the same output.
    """

    episodes: int = 0
    same_episodes: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    same: dict[str, int] = field(default_factory=dict)

    @property
    def total_calls(self) -> int:
        """Return the module calls compared, over every role."""
        return sum(self.calls.values())

    @property
    def total_same(self) -> int:
        """Return the compared calls that wrote the same output, over every role."""
        return sum(self.same.values())

    @property
    def share(self) -> float | None:
        """Return the share of compared calls with the same output (None without calls)."""
        return self.total_same / self.total_calls if self.total_calls else None

    def add(self, other: Agreement) -> None:
        """Add another set of episodes' counts to these."""
        self.episodes += other.episodes
        self.same_episodes += other.same_episodes
        for role, n in other.calls.items():
            self.calls[role] = self.calls.get(role, 0) + n
        for role, n in other.same.items():
            self.same[role] = self.same.get(role, 0) + n

    def to_dict(self) -> dict[str, Any]:
        """Return the counts as JSON-ready values."""
        return {"episodes": self.episodes, "same_episodes": self.same_episodes,
                "calls": self.total_calls, "same_outputs": self.total_same,
                "share": self.share, "by_role": {
                    role: {"calls": n, "same_outputs": self.same.get(role, 0)}
                    for role, n in sorted(self.calls.items())}}


def _is_call(turn: Any) -> bool:
    """Whether a turn is a module call: a role and an output, not gold data."""
    return (isinstance(turn, Mapping) and "role" in turn and "output" in turn
            and not turn.get("gold"))


def _turns(record: Mapping[str, Any]) -> list[Any]:
    turns = record.get("turns")
    return list(turns) if isinstance(turns, list) else []


def _without_prompt(turn: Any) -> Any:
    if isinstance(turn, Mapping) and "prompt" in turn:
        return {k: v for k, v in turn.items() if k != "prompt"}
    return turn


def episode_agreement(a: Mapping[str, Any], b: Mapping[str, Any]) -> Agreement:
    """Return the agreement of two records of one task (see the module docstring)."""
    turns_a, turns_b = _turns(a), _turns(b)
    found = Agreement(episodes=1)
    for x, y in zip(turns_a, turns_b, strict=False):
        if _is_call(x) and _is_call(y) and x["role"] == y["role"]:
            if "prompt" in x and "prompt" in y and x["prompt"] != y["prompt"]:
                break  # the prompts say it: this call and every later one saw others
            role = str(x["role"])
            found.calls[role] = found.calls.get(role, 0) + 1
            if x["output"] != y["output"]:
                found.same.setdefault(role, 0)
                break
            found.same[role] = found.same.get(role, 0) + 1
            if _without_prompt(x) != _without_prompt(y):
                break  # the same text, but something else of the turn differs
        elif _without_prompt(x) != _without_prompt(y):
            break
    same_turns = [_without_prompt(t) for t in turns_a] == [_without_prompt(t) for t in turns_b]
    found.same_episodes = int(same_turns and a.get("status") == b.get("status"))
    return found


def agreement(pairing: Pairing) -> dict[str, Agreement]:
    """Return each env's agreement over the paired episodes of ``pairing``."""
    by_env: dict[str, Agreement] = {}
    for env_id, pairs in pairing.pairs.items():
        total = Agreement()
        for _, x, y in pairs:
            total.add(episode_agreement(x, y))
        by_env[env_id] = total
    return by_env


def overall(by_env: Mapping[str, Agreement]) -> Agreement:
    """Return the agreement over every env of ``by_env``."""
    total = Agreement()
    for found in by_env.values():
        total.add(found)
    return total


def share_text(same: int, calls: int) -> str:
    """``same/calls (pct%)``, or ``-`` without calls."""
    return f"{same}/{calls} ({same / calls:.1%})" if calls else "-"


def agreement_rows(
    by_env: Mapping[str, Agreement], short: Callable[[str], str] = str
) -> tuple[list[str], list[Sequence[Any]]]:
    """Return the headers and rows of an agreement table: each env, then all of them.

    Envs are named by ``short``; each role gets a column of its own.
    """
    roles = sorted({role for found in by_env.values() for role in found.calls})
    headers = ["env", "paired", "same episodes", "calls compared", "same outputs",
               *(f"{role} same" for role in roles)]
    rows: list[Sequence[Any]] = []
    total = overall(by_env)
    for name, found in [*((short(e), f) for e, f in by_env.items()), ("all", total)]:
        rows.append([
            name, found.episodes, f"{found.same_episodes}/{found.episodes}", found.total_calls,
            share_text(found.total_same, found.total_calls),
            *(share_text(found.same.get(r, 0), found.calls.get(r, 0)) for r in roles),
        ])
    return headers, rows
