"""Every document the repository cites is a file the repository holds.

Docs, docstrings, data files and the rendered boards cite documents by path: a Markdown link
(`[docs](docs/agents.md#the-lumos-loop)`), or a path in plain text
(`docs/lumos-format.md §1.5`). A reader of a clone has only the tracked files, so each cited
path must be one of them, and a link's `#anchor` must be a heading or an `id` of the page.

What is checked, in every text file git tracks or would track (new files not ignored):

* Markdown links in `.md` files whose target is not a URL: the target, relative to the file's
  folder, must exist; an anchor into a `.md` file must exist in it;
* `.md` and `.png` paths in plain text that start with a top-level folder of the repository
  (`docs/...`, `leaderboards/...`) or with `./` or `../`: from the repository root, or from the
  file's folder;
* bare document names in capitals (`OLD_SPEC.md`, `STYLE.md`): some tracked file must have
  that name, except the names lumos-gym writes into output folders at run time.

Placeholders (`{split}/image.png`, `runs/*/NOTES.md`) and paths under folders that are not the
repository's (`OUT/report.md`) are not citations and are skipped.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".md", ".py", ".json", ".html", ".toml", ".txt", ".cfg", ".yml", ".yaml", ".sh"}
TEXT_NAMES = {"Makefile"}
#: Names that lumos-gym writes into output folders at run time, cited as such (not documents
#: of the repository): ``reproduce`` keeps a run's ``NOTES.md`` with its card.
RUNTIME_NAMES = {"NOTES.md"}

LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
PATH = re.compile(
    r"(?<![\w./\-:{}@])((?:\.{1,2}/)*[\w\-{},*]+(?:/[\w\-{},*.]+)*\.(?:md|png))(?![\w/])"
)
BARE = re.compile(r"^[A-Z][A-Z0-9_\-]*\.md$")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
ANCHOR_ID = re.compile(r"""<a\s[^>]*(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def tracked_files() -> list[Path]:
    """The text files of the checkout: tracked, or new and not ignored (every file without git)."""
    try:
        names = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout.decode("utf-8").split("\0")
        paths = [ROOT / name for name in names if name]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "node_modules", "__pycache__", "build", "dist", "runs", "results"}
        paths = [p for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)]
    here = Path(__file__).resolve()  # this file's examples cite missing files on purpose
    return sorted(
        p for p in paths
        if p.is_file() and (p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES) and p != here
    )


FILES = tracked_files()
NAMES = {p.name for p in FILES} | {p.name for p in ROOT.rglob("*.png") if ".git" not in p.parts}
TOP_LEVEL = {p.relative_to(ROOT).parts[0] for p in FILES if len(p.relative_to(ROOT).parts) > 1}


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a link may name on a Markdown page: heading slugs (numbered when repeated)
    and explicit ``<a id>`` / ``name`` anchors."""
    text = page.read_text(encoding="utf-8")
    found = set(ANCHOR_ID.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def expand(path: str) -> list[str] | None:
    """A path's alternatives (``a_{1,2}.png`` is two); None for a placeholder or a glob."""
    if "*" in path:
        return None
    parts = re.split(r"(\{[^{}]*\})", path)
    choices = []
    for part in parts:
        if part.startswith("{"):
            if "," not in part:
                return None  # {split}: a placeholder, not a file
            choices.append(part[1:-1].split(","))
        else:
            choices.append([part])
    return ["".join(c) for c in itertools.product(*choices)]


def exists(path: str, base: Path) -> bool:
    """Whether ``path`` names a file or folder from ``base`` or from the repository root."""
    return any((b / path).exists() for b in (base, ROOT))


def link_problems(page: Path, text: str) -> list[str]:
    problems = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"^[a-z][a-z0-9+.\-]*:", target, re.I):  # https:, mailto:, ...
            continue
        path, _, fragment = target.partition("#")
        path = path.split("?", 1)[0]
        if any(c in path for c in "{}*"):
            continue
        dest = (page.parent / path) if path else page
        if not dest.exists():
            problems.append(f"link to {target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            problems.append(f"link to {target}: {dest.name} has no anchor #{fragment}")
    return problems


def path_problems(page: Path, text: str) -> list[str]:
    problems = []
    for token in PATH.findall(text):
        if "/" not in token:
            if BARE.match(token) and token not in NAMES and token not in RUNTIME_NAMES:
                problems.append(f"cites {token}, which no file of the repository is")
            continue
        first = token.split("/", 1)[0]
        if first not in TOP_LEVEL and first not in (".", ".."):
            continue  # OUT/report.md, train/5/image.png: not a path of the repository
        for path in expand(token) or []:
            if not exists(path, page.parent):
                problems.append(f"cites {path}, which the repository does not hold")
    return problems


@pytest.mark.parametrize("page", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_documents_are_in_the_repository(page):
    text = page.read_text(encoding="utf-8", errors="replace")
    problems = path_problems(page, text)
    if page.suffix == ".md":
        problems += link_problems(page, text)
    assert not problems, "\n".join(sorted(set(problems)))


def test_the_checks_catch_what_they_are_for(tmp_path):
    page = ROOT / "docs" / "agents.md"
    assert path_problems(page, "see OLD_SPEC.md §1.5") == [
        "cites OLD_SPEC.md, which no file of the repository is"]
    assert path_problems(page, "docs/static/images/lumos_results_{1,2}.png") == [
        "cites docs/static/images/lumos_results_1.png, which the repository does not hold",
        "cites docs/static/images/lumos_results_2.png, which the repository does not hold"]
    assert path_problems(page, "docs/lumos-format.md §4.2, OUT/report.md, runs/*/NOTES.md, "
                         "images/{split}/image.png, NOTES.md, https://x.org/a/README.md") == []
    assert link_problems(page, "[a](lumos-format.md#s4.2) [b](https://x.org/y.md)") == []
    assert link_problems(page, "[a](lumos-format.md#s9.9)") == [
        "link to lumos-format.md#s9.9: lumos-format.md has no anchor #s9.9"]
    assert link_problems(page, "[a](missing.md)") == ["link to missing.md: no such file"]
    assert link_problems(page, "[a](#the-lumos-loop)") == []


def test_lumos_format_keeps_its_section_anchors():
    """Code and docs cite docs/lumos-format.md by section number; each number has its anchor."""
    found = anchors(ROOT / "docs" / "lumos-format.md")
    sections = ["1", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "2", "2.1", "2.2", "2.3",
                "2.4", "2.5", "2.6", "3", "3.1", "3.2", "4", "4.1", "4.2"]
    assert {f"s{n}" for n in sections} <= found
