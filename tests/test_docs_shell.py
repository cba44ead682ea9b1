"""Every shell block of the README and the docs runs as printed, or says why it cannot.

A fenced block in `sh`, `bash` or `shell` is run with bash (`-e -o pipefail`) in a scratch
folder laid out like a checkout: `.venv` (this interpreter's environment), `docs/` and a copy
of `leaderboards/`, with the environment's `bin/` first on PATH and the hub offline. A block
that needs more (a GPU, the network, trained models, minutes of work, a server left running)
carries a comment on the line before its fence:

    <!-- docs-test: skip, REASON -->

A block that runs but takes most of a minute says `<!-- docs-test: slow, REASON -->` instead:
it is marked `slow`, so `make test-slow` runs it and `make test` leaves it out.

After each block the copy of `leaderboards/` must still equal the committed one, so the
documented commands that render the boards reproduce them byte for byte.
"""

from __future__ import annotations

import contextlib
import filecmp
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "leaderboards/README.md"]
FENCE = re.compile(r"^```(sh|bash|shell)\n(.*?)^```", re.M | re.S)
SKIP = re.compile(r"<!-- docs-test: skip, (.+?) -->\s*$")
SLOW = re.compile(r"<!-- docs-test: slow, (.+?) -->\s*$")
TIMEOUT_S = 300  # a guard against a hung block, not a speed claim


def shell_blocks() -> list[tuple[str, str, str | None, bool]]:
    """(id, script, skip reason or None, slow) of every shell block in the README and docs."""
    blocks = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for number, match in enumerate(FENCE.finditer(text), 1):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            skip = SKIP.search(before)
            name = f"{path.relative_to(ROOT)}#{number}"
            slow = SLOW.search(before) is not None
            blocks.append((name, match.group(2), skip.group(1) if skip else None, slow))
    return blocks


BLOCKS = shell_blocks()


def test_every_block_is_run_or_says_why_not():
    assert len(BLOCKS) > 20
    run = [name for name, _, reason, slow in BLOCKS if reason is None and not slow]
    assert len(run) >= 6, run
    for name, _, reason, _ in BLOCKS:
        assert reason is None or len(reason.split()) >= 2, f"{name}: give a reason to skip"


def changed_files(copy: Path, original: Path) -> list[str]:
    """Files that differ between two trees, or stand in only one of them (recursively)."""
    compared = filecmp.dircmp(copy, original)
    out = [*compared.left_only, *compared.right_only, *compared.funny_files]
    out += [
        name
        for name in compared.common_files
        if not filecmp.cmp(copy / name, original / name, shallow=False)
    ]
    for name in compared.common_dirs:
        out += [f"{name}/{inner}" for inner in changed_files(copy / name, original / name)]
    return out


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A scratch folder with what the documented commands read, shared by the blocks in order."""
    folder = tmp_path_factory.mktemp("docs-shell")
    (folder / ".venv").symlink_to(Path(sys.prefix))
    (folder / "docs").symlink_to(ROOT / "docs")
    shutil.copytree(ROOT / "leaderboards", folder / "leaderboards")
    return folder


@pytest.mark.full
@pytest.mark.parametrize(
    ("name", "script"),
    [
        pytest.param(name, script, id=name, marks=[pytest.mark.slow] if slow else [])
        for name, script, reason, slow in BLOCKS
        if reason is None
    ],
)
def test_shell_block_runs(name, script, checkout):
    env = {**os.environ, "PATH": f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(ROOT))
    # the conftest's backend choice is for in-process tests: a user has none
    env.pop("LUMOS_GYM_BACKEND", None)
    # its own process group, so that a block that hangs is stopped with everything it started
    # (a server left in the background would outlive a killed bash)
    block = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = block.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(block.pid, signal.SIGKILL)
        block.communicate()
        raise
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(block.pid, signal.SIGKILL)  # whatever the block left running
    done = subprocess.CompletedProcess(block.args, block.returncode, stdout, stderr)
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    changed = changed_files(checkout / "leaderboards", ROOT / "leaderboards")
    assert not changed, f"{name} changed committed leaderboard files: {changed[:10]}"
