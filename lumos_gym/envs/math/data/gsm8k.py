"""The GSM8K loader (main and socratic formats)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lumos_gym.envs.math.data.calc import _CALC_MARK, _calc_actions, _final_answer, parse_calc_marks
from lumos_gym.envs.math.data.files import _read_records, _required, _split_path
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError

_GSM8K_EXPECTED = 'GSM8K JSON lines {"question": ..., "answer": "...\\n#### <number>"}'


def _mask_marks(line: str) -> str:
    return _CALC_MARK.sub(lambda m: "\0" * len(m.group(0)), line)


def _gsm8k_steps(rationale: str) -> list[dict[str, Any]]:
    """Split a solution into steps: ``{"subquestion", "text", "calcs"}`` per non-blank line."""
    steps = []
    for line in rationale.splitlines():
        if not line.strip():
            continue
        cut = _mask_marks(line).find(" ** ")
        sub, text = (line[:cut].strip(), line[cut + 4 :].strip()) if cut >= 0 else (None, line)
        calcs = [{"expr": c.expr, "value": c.value} for c in parse_calc_marks(text)]
        steps.append({"subquestion": sub, "text": text.strip(), "calcs": calcs})
    return steps


def load_gsm8k(path: str | Path, split: str = "test") -> list[Task]:
    """Load a GSM8K file (main or socratic format).

    Args:
        path: a ``.jsonl`` file of ``{"question", "answer"}`` records (or a JSON list of them).
        split: the split name used in task ids (``gsm8k/{split}/{index}``).

    Returns:
        One task per record, in file order; ``index`` counts records (blank lines skipped).
        ``answer`` is the text after ``####`` without commas; ``rationale`` is the solution
        before ``####``, verbatim (marks included, see :func:`strip_calc_marks`);
        ``gold_actions`` has one ``R<k> = Calculator(expr)`` per calculator mark, then
        ``Answer(R<k>)`` when the last mark's value equals the gold number, else
        ``Answer(<gold>)``. ``meta`` holds ``raw`` (the record), ``variant`` (``"main"`` or
        ``"socratic"``), ``steps`` (sub-question, text and marks of each line) and ``calcs``.

    Raises:
        DataError: missing or empty file, bad JSON, a missing field, or no ``####`` line.
    """
    path, split = Path(path), _split_path(split)
    tasks = []
    for rec in _read_records(path, _GSM8K_EXPECTED):
        question = _required(path, rec, ("question",), _GSM8K_EXPECTED).strip()
        solution = _required(path, rec, ("answer",), _GSM8K_EXPECTED)
        before, sep, after = solution.rpartition("####")
        gold = after.strip().replace(",", "")
        if not sep or not gold:
            raise DataError(
                f"{path}: {rec.where}: the answer has no final '#### <number>' line; "
                f"expected {_GSM8K_EXPECTED}"
            )
        rationale = before.strip()
        steps = _gsm8k_steps(rationale)
        marks = parse_calc_marks(rationale)
        actions = _calc_actions([m.expr for m in marks])
        actions.append(_final_answer([m.value for m in marks], gold))
        socratic = any(s["subquestion"] is not None for s in steps)
        tasks.append(
            Task(
                id=f"gsm8k/{split}/{rec.index}",
                question=question,
                answer=gold,
                task_type="math",
                rationale=rationale,
                gold_actions=tuple(actions),
                meta={
                    "dataset": "gsm8k",
                    "variant": "socratic" if socratic else "main",
                    "raw": dict(rec.data),
                    "steps": steps,
                    "calcs": [{"expr": m.expr, "value": m.value} for m in marks],
                },
            )
        )
    return tasks
