"""The Lumos paper's three claims, each measured here beside the paper's own numbers.

(a) Lumos-I beats the other training formulations on the same data: integrated training, CoT
training and direct answers; (b) Lumos-I against Lumos-O; (c) the unified agent generalises: it
beats the domain-specific ones on an unseen task (the paper's WebShop table).

Each measured comparison is ``Lumos-I minus X``, paired episode by episode, read from the
board's paired differences to its reference row (``--reference``, which must be a Lumos-I row):
per env, the interval of the difference either lies above 0 (Lumos-I ahead), below 0
(behind) or holds 0 (undecided). The paper's numbers are the differences of its LLaMA-2-7B rows
on its datasets, in percentage points (:data:`PAPER_ROWS`, from ``reported.json``); they are
set beside the measured ones, not compared cell by cell, since the envs are not the paper's
full datasets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.envs.registration import families
from lumos_gym.leaderboard.stats import PairedDiff, with_holm
from lumos_gym.text import markdown_table

#: Our agent name → the paper's dataset → the reported row that stands for it (its baseline
#: formulations table: Lumos-I and Lumos-O are the domain-specific rows of each dataset).
PAPER_ROWS: dict[str, dict[str, str]] = {
    "lumos-i": {
        "Mind2Web": "Lumos-I_Web", "GSM8K": "Lumos-I_Math", "SVAMP": "Lumos-I_Math",
        "StrategyQA": "Lumos-I_QA (GPT-3.5-turbo QA tool)",
        "HotpotQA (LLM acc)": "Lumos-I_QA (GPT-3.5-turbo QA tool)",
    },
    "lumos-o": {
        "GSM8K": "Lumos-O_Math", "SVAMP": "Lumos-O_Math",
        "StrategyQA": "Lumos-O_QA (GPT-3.5-turbo QA tool)",
        "HotpotQA (LLM acc)": "Lumos-O_QA (GPT-3.5-turbo QA tool)",
    },
    "integrated": dict.fromkeys(("Mind2Web", "GSM8K", "SVAMP", "StrategyQA",
                                 "HotpotQA (LLM acc)"), "Integrated Training (LLaMA-2-7B)"),
    "cot": dict.fromkeys(("GSM8K", "SVAMP", "StrategyQA", "HotpotQA (LLM acc)"),
                         "CoT Training (LLaMA-2-7B)"),
}


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims: Lumos-I against the rows of other agents."""

    key: str
    title: str
    against: tuple[str, ...]


CLAIMS = (
    Claim("a", "Lumos-I against the other formulations trained on the same data",
          ("integrated", "cot", "direct")),
    Claim("b", "Lumos-I against Lumos-O", ("lumos-o",)),
)

#: Claim (c) on a board whose rows do not measure it: the paper's numbers and where to look.
GENERALISATION = (
    "(c) Generalisation: the paper's unified Lumos-I_All scores 39.8 on WebShop, a task none of "
    "its agents trained on, against 34.7, 30.1 and 33.5 for Lumos-I trained on web, math or QA "
    "alone. No row of this board measures it: that takes a reference Lumos-I trained with a "
    "family left out and a Lumos-I trained on one family alone (`lumos-gym reproduce "
    "--leave-out`, `--families`), scored on the left-out family's envs, as on the "
    "`generalisation` board (leaderboards/GENERALISATION.md)."
)

#: Claim (c) measured: how its rows are chosen.
GENERALISATION_NOTE = (
    "(c) Generalisation: the reference Lumos-I, trained on several families, minus a Lumos-I "
    "trained on one family alone, on the envs of the families neither trained on (read from "
    "each row's training cards, which count their records per dataset). The paper's unseen "
    "task was WebShop: its unified Lumos-I_All scores 39.8 there, against 34.7, 30.1 and 33.5 "
    "for Lumos-I trained on web, math or QA alone."
)


def paper_differences(reported_rows: Sequence[Mapping[str, Any]], other: str) -> str:
    """``GSM8K +1.6, SVAMP +1.9, ...``: the paper's Lumos-I minus ``other``, in points."""
    values = {row["agent"]: row.get("values") or {} for row in reported_rows}
    parts = []
    for dataset, mine in PAPER_ROWS["lumos-i"].items():
        theirs = PAPER_ROWS.get(other, {}).get(dataset)
        a, b = values.get(mine, {}).get(dataset), values.get(theirs, {}).get(dataset)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            parts.append(f"{dataset} {a - b:+.1f}")
    return ", ".join(parts) or "not reported"


def flipped(diff: PairedDiff) -> PairedDiff:
    """The same comparison the other way round (B minus A)."""
    ci = [-diff.ci95[1], -diff.ci95[0]] if diff.ci95 else None
    discordant = diff.discordant[::-1] if diff.discordant else None
    return PairedDiff(diff.n, diff.mean_b, diff.mean_a, -diff.diff, ci, diff.test, diff.p_value,
                      discordant, diff.envs, diff.p_holm)


@dataclass
class Verdict:
    """Where Lumos-I stands against one row: the envs it is ahead of, behind, undecided."""

    row: str
    suite: PairedDiff | None  # None: the suite mixes envs the claim does not compare
    ahead: list[str]
    behind: list[str]
    undecided: list[str]
    left_out: list[str] = field(default_factory=list)  # envs the claim does not count
    why: str = ""  # why they are left out


def verdict(
    row: str, suite: PairedDiff | None, envs: Mapping[str, PairedDiff], *,
    left_out: Sequence[str] = (), why: str = "",
) -> Verdict:
    """Sort the envs of one comparison (already Lumos-I minus the row) by their difference.

    The envs are one family: their p-values are Holm-adjusted together, and an env counts as
    ahead or behind only when its difference is significant (its interval excludes 0 and its
    adjusted p is below 0.05: :attr:`PairedDiff.significant`); the others are undecided.
    """
    ahead, behind, undecided = [], [], []
    for env_id, diff in with_holm(envs).items():
        if diff.n == 0 or not diff.ci95:
            continue
        decided = diff.significant
        (ahead if decided and diff.diff > 0 else behind if decided and diff.diff < 0
         else undecided).append(env_id)
    return Verdict(row, suite, ahead, behind, undecided, list(left_out), why)


#: Whether an agent can act in an env: ``(agent, env id) -> bool`` (see
#: :meth:`lumos_gym.agents.base.Agent.can_act`).
CanAct = Callable[[str, str], bool]


def _acting(
    envs: Mapping[str, PairedDiff], agents: Sequence[str], can_act: CanAct | None
) -> tuple[dict[str, PairedDiff], list[str]]:
    """The envs where every one of ``agents`` can act, and those left out."""
    if can_act is None:
        return dict(envs), []
    kept = {e: d for e, d in envs.items() if all(can_act(a, e) for a in agents)}
    return kept, [e for e in envs if e not in kept]


def claim_rows(
    claim: Claim, reference_agent: str, comparisons: Mapping[str, Any],
    agents: Mapping[str, str], can_act: CanAct | None = None,
) -> list[tuple[str, Verdict]]:
    """(agent, verdict) for each measured row of the claim's agents (none: nothing measured).

    ``comparisons``: row name → its comparison with the reference row (row minus reference);
    ``agents``: row name → agent name; ``can_act``: whether an agent can act in an env. An
    env where either agent cannot act (a one-step agent in a web or game env, whose 0 there is
    by construction) is left out of the verdict, and then of its suite difference too (the
    suite score averages every env).
    """
    if reference_agent != "lumos-i":
        return []
    out = []
    for name, comparison in comparisons.items():
        if agents.get(name) in claim.against:
            envs, left_out = _acting({e: flipped(d) for e, d in comparison.envs.items()},
                                     (reference_agent, agents[name]), can_act)
            suite = flipped(comparison.suite) if not left_out else None
            out.append((agents[name], verdict(name, suite, envs, left_out=left_out,
                                              why="cannot act")))
    return out


#: The paper's domain-specific Lumos-I rows by the env family they trained on, and its unified
#: row: claim (c)'s numbers, on WebShop (``reported.json``).
PAPER_DOMAIN_ROWS = {"web": "Lumos-I_Web", "math": "Lumos-I_Math", "qa": "Lumos-I_QA"}
PAPER_UNIFIED_ROW = "Lumos-I_All (unified)"


def trained_families(cards: Iterable[Mapping[str, Any]]) -> frozenset[str] | None:
    """The env families whose records trained a row's models, from their training cards.

    None when a row has no card, or a card that does not count its records per dataset (a
    report from before the count, or an adapter not trained here): what it saw is unknown.
    """
    family_of = {domain: f.name for f in families() for domain in (*f.mix, *f.domains.values())}
    seen: set[str] = set()
    cards = list(cards)
    for card in cards:
        counts = card.get("datasets")
        if not isinstance(counts, Mapping) or not counts:
            return None
        seen |= {family_of.get(str(name), str(name)) for name, n in counts.items() if n}
    return frozenset(seen) if cards else None


def env_family(env_id: str) -> str | None:
    """The family of a registered env id (None for an env no family declares)."""
    return next((f.name for f in families() for info in f.envs if info.id == env_id), None)


def generalisation_rows(
    reference: str, reference_agent: str, comparisons: Mapping[str, Any],
    agents: Mapping[str, str], trained: Mapping[str, frozenset[str] | None],
) -> list[tuple[str, Verdict]]:
    """Claim (c)'s measured rows: (the family a domain-specific row trained on, its verdict).

    The reference must be a Lumos-I trained on two families or more; each Lumos-I row trained
    on exactly one family is compared with it on the envs of the families neither saw. The
    verdict's suite difference is the comparison's own when every paired env is unseen by
    both, else None (the suite mixes seen and unseen envs).
    """
    unified = trained.get(reference)
    if reference_agent != "lumos-i" or unified is None or len(unified) < 2:
        return []
    out: list[tuple[str, Verdict]] = []
    for name, comparison in comparisons.items():
        own = trained.get(name)
        if agents.get(name) != "lumos-i" or own is None or len(own) != 1:
            continue
        paired = [e for e, d in comparison.envs.items() if d.n]
        families_of = {e: env_family(e) for e in paired}  # None: no family declares the env
        unseen = [e for e, f in families_of.items() if f is not None and f not in unified | own]
        if not unseen:
            continue
        # an env where either row scores at the floor says nothing of which generalises
        floor = [e for e in unseen if min(comparison.envs[e].mean_a,
                                          comparison.envs[e].mean_b) <= FLOOR]
        kept = [e for e in unseen if e not in floor]
        suite = flipped(comparison.suite) if len(kept) == len(paired) else None
        envs = {e: flipped(comparison.envs[e]) for e in kept}
        out.append((next(iter(own)), verdict(name, suite, envs, left_out=floor,
                                             why="at the floor")))
    return out


#: The score at or below which a row is at the floor of an env (claim (c) leaves such envs out).
FLOOR = 0.0


def paper_generalisation(reported_rows: Sequence[Mapping[str, Any]], family: str) -> str:
    """``WebShop +6.3``: the paper's unified Lumos-I minus its Lumos-I trained on ``family``."""
    values = {row["agent"]: row.get("values") or {} for row in reported_rows}
    a = values.get(PAPER_UNIFIED_ROW, {}).get("WebShop")
    b = values.get(PAPER_DOMAIN_ROWS.get(family, ""), {}).get("WebShop")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return f"WebShop {a - b:+.1f}"
    return "not reported"


CLAIMS_NOTE = (
    "Each measured row: the reference Lumos-I row minus the named row, paired by env, task and "
    "seed; *ahead* and *behind* count the envs whose difference is significant (its 95% "
    "interval excludes 0 and its test gives p < 0.05 after a Holm correction over the envs the "
    "claim counts), the rest are undecided. *Left out*: envs where one of the two agents cannot "
    "act (CoT and direct answer in one step, so they cannot act in web and game envs: their 0 "
    "there is by construction), and, for claim (c), envs where either row scores at the floor "
    "(0); the suite score is then not given, as it averages every env. The paper's column "
    "gives its LLaMA-2-7B rows' differences on its own datasets, in points."
)


def claims_markdown(
    reference: str, reference_agent: str, comparisons: Mapping[str, Any],
    agents: Mapping[str, str], reported_rows: Sequence[Mapping[str, Any]],
    short: Callable[[str], str], diff_text: Callable[[PairedDiff], str],
    trained: Mapping[str, frozenset[str] | None] | None = None,
    can_act: CanAct | None = None,
) -> list[str]:
    """The Markdown section of the paper's claims.

    ``trained``: row name → the env families its models trained on (:func:`trained_families`),
    for claim (c). None without a Lumos-I reference row, or when no row measures a claim (a
    board of Lumos-I variants alone, such as the ``learning`` suite's).
    """
    measured_rows = [claim_rows(claim, reference_agent, comparisons, agents, can_act)
                     for claim in CLAIMS]
    general = generalisation_rows(reference, reference_agent, comparisons, agents, trained or {})
    if not any(measured_rows) and not general:  # also when the reference is not Lumos-I
        return []
    lines = ["", "## The paper's claims, measured", "",
             f"Reference: `{reference}`. {CLAIMS_NOTE}", ""]
    headers = ["claim", "against", "run", "paper: Lumos-I minus it", "suite score",
               "ahead", "behind", "undecided", "left out"]
    table = []
    # a board that measures claim (c) alone lists no unmeasured (a) and (b) rows
    shown = zip(CLAIMS, measured_rows, strict=True) if any(measured_rows) else ()
    for claim, rows in shown:
        measured = {agent for agent, _ in rows}
        table += [_claim_cells(claim.key, agent, v, paper_differences(reported_rows, agent),
                               short, diff_text) for agent, v in rows]
        table += [
            [f"({claim.key})", agent, "not measured", paper_differences(reported_rows, agent),
             "-", "-", "-", "-", "-"]
            for agent in claim.against if agent not in measured
        ]
    table += [_claim_cells("c", f"Lumos-I on {family} alone", v,
                           paper_generalisation(reported_rows, family) if _measured(v)
                           else "-", short, diff_text)
              for family, v in general]
    lines += markdown_table(headers, table)
    lines += ["", GENERALISATION_NOTE if general else GENERALISATION]
    if general and not any(_measured(v) for _, v in general):
        lines += ["", UNMEASURABLE_C]
    return lines


#: Claim (c) when every unseen env has a row at the floor.
UNMEASURABLE_C = (
    "Claim (c) cannot be measured at this scale: on every env neither row trained on, one of "
    "the two rows (or both) scores 0, so a difference there says nothing about which "
    "generalises better, and the paper's numbers are not set beside it. Measuring it takes "
    "rows that score above the floor on an unseen family (a family chosen on validation, or "
    "larger models)."
)


def _measured(v: Verdict) -> bool:
    """Whether a verdict counts at least one env."""
    return bool(v.ahead or v.behind or v.undecided)


def _claim_cells(
    key: str, against: str, v: Verdict, paper: str, short: Callable[[str], str],
    diff_text: Callable[[PairedDiff], str],
) -> list[str]:
    """One measured row of the claims table."""
    suite = diff_text(v.suite).replace("*", "\\*") if v.suite is not None else "-"
    left_out = f"{_envs(v.left_out, short)} ({v.why})" if v.left_out else "0"
    return [f"({key})", against, f"`{v.row}`", paper, suite,
            _envs(v.ahead, short), _envs(v.behind, short), _envs(v.undecided, short), left_out]


def _envs(envs: Sequence[str], short: Callable[[str], str]) -> str:
    return f"{len(envs)}: " + ", ".join(short(e) for e in envs) if envs else "0"
