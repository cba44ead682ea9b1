"""Plain-text and Markdown rendering shared by the command line and the reports."""

from __future__ import annotations

from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Render a plain-text table with left-aligned columns and a dashed rule under the header."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def markdown_cell(value: object) -> str:
    """One Markdown table cell: a pipe escaped, a line break made a space."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], align: str = ""
) -> list[str]:
    """The lines of a Markdown pipe table; column i is right-aligned where ``align[i] == "r"``."""
    rule = ["---:" if align[i:i + 1] == "r" else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(markdown_cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join(rule) + "|")
    lines += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return lines
