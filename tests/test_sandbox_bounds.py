"""What one sandboxed program may leave on the host: bounded writes, no leftovers, no keyrings.

Each test runs under every isolation level that works here (bubblewrap; unshare with a mount
namespace; unshare's namespaces alone; none), forced through ``sandbox.isolation``. The caps
are small (32-64 MiB, a few thousand files) so that a test cannot hurt the machine even when
a bound fails, and every file a program writes outside its folder is removed afterwards.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import pytest
from conftest import poll, processes_with_args

from lumos_gym.actions import Action
from lumos_gym.errors import SandboxError, ToolError
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.tools import sandbox
from lumos_gym.tools.base import ToolContext
from lumos_gym.tools.code import Code
from lumos_gym.tools.sandbox import (
    MAX_WORK_FILES,
    MAX_WRITE_MB,
    NO_ISOLATION,
    TEMP_PREFIX,
    Isolation,
    namespace_flags,
    remove_stale_workdirs,
    run_python,
    try_isolation,
)

CHECKOUT = Path(__file__).resolve().parents[1]
LEVELS = ("bwrap", "unshare", "namespaces", "plain")
# The levels whose working directory is a tmpfs of the box's own.
TMPFS_LEVELS = ("bwrap", "unshare")
MB = 1 << 20


def box_of(level: str) -> Isolation | None:
    """The isolation ``level`` names, if it works here."""
    if level in TMPFS_LEVELS:
        return try_isolation(level, False)
    if level == "namespaces":
        flags = namespace_flags(False)
        if not flags:
            return None
        return Isolation("unshare", flags, network="-n" in flags, processes="-p" in flags,
                         user="-r" in flags)
    return NO_ISOLATION


@pytest.fixture(params=LEVELS)
def level(request, monkeypatch):
    """Run the test with each isolation level that works here."""
    box = box_of(request.param)
    if box is None:
        pytest.skip(f"{request.param} cannot isolate here (not installed, or namespaces refused)")
    monkeypatch.setattr(sandbox, "isolation", lambda network: box)
    monkeypatch.setattr(sandbox, "_warn_unisolated", lambda missing: None)  # tested apart
    return request.param


@pytest.fixture(autouse=True)
def own_temp_folder(no_leftover_sandboxes):
    """Give each test a temp folder of its own, and fail when a sandbox folder is left in it."""
    yield Path(tempfile.gettempdir())


# A program that writes 1 MiB at a time into PATH_PATTERN % n, 8 MiB a file (under the 16 MiB
# RLIMIT_FSIZE), until it has written GOAL MiB or a write fails; it prints its total as it goes.
FILL = """\
import os
total, n = 0, 0
try:
    while total < {goal} << 20:
        with open({pattern!r} % n, "wb") as f:
            for _ in range(8):
                f.write(b"x" * (1 << 20))
                f.flush()
                total += 1 << 20
                print(total >> 20, flush=True)
        n += 1
except OSError as e:
    print("stopped", total >> 20, e.errno, flush=True)
"""


def _stopped_at(stdout: str) -> tuple[int, int | None]:
    """The MiB the FILL program wrote and the errno that stopped it (None: it was killed)."""
    lines = stdout.splitlines()
    if lines and lines[-1].startswith("stopped"):
        _, written, errno = lines[-1].split()
        return int(written), int(errno)
    return (int(lines[-1]) if lines else 0), None


class _Lowest:
    """Samples the host's available memory every 10 ms while it is open; keeps the lowest."""

    def __enter__(self) -> _Lowest:
        self.before = psutil.virtual_memory().available
        self.lowest = self.before
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.01):
            self.lowest = min(self.lowest, psutil.virtual_memory().available)

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    @property
    def drop_mb(self) -> float:
        return (self.before - self.lowest) / MB


def test_work_folder_writes_stop_at_the_cap_and_spare_host_memory(level):
    # The box tries to write 512 MiB with a 32 MiB cap. Other processes move the host's
    # available memory too, so the drop is measured up to three times and the least is kept:
    # a box that held its 512 MiB in host memory would show every time.
    drops = []
    for _ in range(3):
        with _Lowest() as memory:
            result = run_python(FILL.format(goal=512, pattern="fill-%d.bin"), timeout=20.0,
                                max_write_mb=32)
        drops.append(memory.drop_mb)
        if memory.drop_mb < 100:
            break
    written, errno = _stopped_at(result.stdout)
    if level in TMPFS_LEVELS:
        assert (errno, result.returncode, result.write_cap_exceeded) == (28, 0, False)  # ENOSPC
        assert 24 <= written <= 32
    else:  # the caller's check kills it, some tens of MiB past the cap at most (it counts
        # allocated blocks, which a file system's preallocation may put ahead of the bytes)
        assert result.write_cap_exceeded and result.signal == "SIGKILL", result
        assert errno is None and written < 512
    assert min(drops) < 100, f"{level}: the host's available memory fell by {drops} MB"
    print(f"{level}: wrote {written} MiB, host memory drop {min(drops):.0f} MB")


def test_dev_shm_is_the_capped_folder_or_the_hosts_per_file_limit(level):
    if level in TMPFS_LEVELS:
        # /dev/shm is a link to the working directory: the same tmpfs, the same cap
        result = run_python(
            "import os\nprint(os.path.realpath('/dev/shm') == os.getcwd())\n"
            + FILL.format(goal=512, pattern="/dev/shm/fill-%d.bin"), max_write_mb=32,
        )
        assert result.stdout.startswith("True\n"), result.stdout + result.stderr
        written, errno = _stopped_at(result.stdout)
        assert errno == 28 and 24 <= written <= 32
        return
    # Without a mount namespace /dev/shm is the host's: only RLIMIT_FSIZE bounds each file.
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("this host has no writable /dev/shm")
    name = f"/dev/shm/lumos-bounds-{os.getpid()}-{random.randrange(10**9)}.bin"
    try:
        result = run_python(
            f"open({name!r}, 'wb').write(b'x' * (3 << 20))", max_file_mb=1, timeout=10.0
        )
        assert result.returncode == 1 and "File too large" in result.stderr
        assert os.path.getsize(name) == MB
    finally:
        if os.path.exists(name):
            os.unlink(name)


def test_many_empty_files_stop_at_the_cap(level, monkeypatch):
    # 256 files rather than MAX_WORK_FILES: creating files on a disk can be slow (1,300/s here)
    monkeypatch.setattr(sandbox, "MAX_WORK_FILES", 256)
    program = (
        "import os\n"
        "n = 0\n"
        "try:\n"
        "    while n < 4096:\n"
        "        open('e%d' % n, 'w').close()\n"
        "        n += 1\n"
        "        if n % 16 == 0:\n"
        "            print(n, flush=True)\n"
        "except OSError as e:\n"
        "    print('stopped', n, e.errno)\n"
    )
    result = run_python(program, timeout=20.0)
    if level in TMPFS_LEVELS:  # the tmpfs's inodes: the folder, main.py, and the rest
        assert result.stdout.splitlines()[-1] == "stopped 255 28", result
    else:
        assert result.write_cap_exceeded, result
        assert int(result.stdout.split()[-1]) < 4096


def test_the_code_tool_reports_a_full_folder(level):
    # files of 8 MiB, since one file alone stops at RLIMIT_FSIZE (16 MiB) first
    program = (r"import itertools\nfor n in itertools.count():\n"
               r"    with open('big%d' % n, 'wb') as f:\n"
               r"        [f.write(b'x' * (1 << 20)) for _ in range(8)]")
    error, message = (ToolError, "No space left on device") if level in TMPFS_LEVELS else (
        SandboxError, f"more than {MAX_WRITE_MB} MB")
    with pytest.raises(error, match=message):
        Code(timeout=20.0).run(Action(("R1",), "Code", program), ToolContext())


def test_proc_keys_shows_no_keyring(level):
    if level not in TMPFS_LEVELS:
        pytest.skip("without a mount namespace the box sees the host's /proc")
    program = (
        "for name in ('/proc/keys', '/proc/key-users'):\n"
        "    try:\n"
        "        print(name, repr(open(name).read()))\n"
        "    except OSError as e:\n"
        "        print(name, type(e).__name__)\n"
    )
    result = run_python(program)
    assert result.ok, result.stderr
    for line in result.stdout.splitlines():
        assert line.split(" ", 1)[1] in ("''", "PermissionError"), line


# --- a killed caller's folder -------------------------------------------------------------

# Runs as the caller that gets killed: a sandboxed program under LEVEL that runs for long.
CALLER = """\
import sys, warnings
from lumos_gym.tools import sandbox
warnings.simplefilter("ignore")  # the warning that a level isolates less is tested apart
level, program = sys.argv[1], sys.argv[2]
if level in ("bwrap", "unshare"):
    box = sandbox.try_isolation(level, False)
elif level == "namespaces":
    flags = sandbox.namespace_flags(False)
    box = sandbox.Isolation("unshare", flags, network="-n" in flags, processes="-p" in flags,
                            user="-r" in flags)
else:
    box = sandbox.NO_ISOLATION
sandbox.isolation = lambda network: box
sandbox.run_python(program, timeout=600)
"""


def _bytes_under(folder: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


@pytest.mark.full
def test_a_killed_callers_folder_is_removed_by_the_next_start(level, tmp_path, monkeypatch):
    token = f"600.{random.randrange(10**8):08d}"  # a unique `sleep` argument
    program = (f"open('fill.bin', 'wb').write(b'x' * (8 << 20))\n"
               f"import os; os.execv('/bin/sleep', ['sleep', '{token}'])")
    workdirs = tmp_path / "killed"
    workdirs.mkdir()
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "TMPDIR": str(workdirs)}
    caller = subprocess.Popen([sys.executable, "-c", CALLER, level, program], env=env)
    try:
        assert poll(lambda: processes_with_args(["sleep", token]), 30.0), "the box did not start"
        folders = [p for p in workdirs.iterdir() if p.name.startswith(TEMP_PREFIX)]
        assert [p.name.split("-")[2] for p in folders] == [str(caller.pid)]
        on_disk = _bytes_under(folders[0])
        if level in TMPFS_LEVELS:  # the 8 MiB are in the box's tmpfs: on disk, main.py alone
            assert on_disk < MB, on_disk
        else:
            assert on_disk >= 8 * MB
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait()
        assert poll(lambda: not processes_with_args(["sleep", token]), 10.0), "the box outlived it"
        assert folders[0].exists()  # the caller had no chance to remove it
        monkeypatch.setattr(tempfile, "tempdir", str(workdirs))
        assert run_python("print('next')").stdout == "next\n"  # the next start sweeps it
        assert list(workdirs.iterdir()) == []
    finally:
        caller.kill()
        caller.wait()
        for pid in processes_with_args(["sleep", token]):
            os.kill(pid, signal.SIGKILL)


def test_the_sweep_takes_only_folders_of_dead_unlocked_callers(tmp_path):
    tmp_path = tmp_path / "swept"
    tmp_path.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that ran and is gone (reused within this test: vanishingly unlikely)
    names = {
        "dead": f"{TEMP_PREFIX}{dead.pid}-abc",
        "dead, locked": f"{TEMP_PREFIX}{dead.pid}-locked",
        "alive": f"{TEMP_PREFIX}{os.getpid()}-xyz",
        "old scheme": f"{TEMP_PREFIX}q1w2e3r4",
        "other": f"other-{dead.pid}-abc",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "main.py").write_text("pass")
    lock = os.open(tmp_path / names["dead, locked"], os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert remove_stale_workdirs(str(tmp_path)) == [str(tmp_path / names["dead"])]
    finally:
        os.close(lock)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        n for k, n in names.items() if k != "dead"
    )
    assert remove_stale_workdirs(str(tmp_path)) == [str(tmp_path / names["dead, locked"])]
    assert remove_stale_workdirs(str(tmp_path / "nowhere")) == []


def test_workdirs_are_named_after_the_caller_and_locked(level, monkeypatch):
    seen = []
    real = sandbox._new_workdir

    def spy():
        workdir, lock = real()
        probe = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
        seen.append(workdir)
        return workdir, lock

    monkeypatch.setattr(sandbox, "_new_workdir", spy)
    assert run_python("print(1)").ok
    assert [Path(p).name.split("-")[2] for p in seen] == [str(os.getpid())]
    assert not Path(seen[0]).exists()


# --- run.json -----------------------------------------------------------------------------


LEVEL_NAMES = {"bwrap": "bubblewrap", "unshare": "unshare", "namespaces": "unshare",
               "plain": "none"}


def test_isolation_record_names_the_level(level):
    box = sandbox.isolation(False)
    assert sandbox.isolation_record() == {
        "isolation": LEVEL_NAMES[level], "filesystem": level in TMPFS_LEVELS,
        "network": box.network, "processes": box.processes, "max_write_mb": MAX_WRITE_MB,
        "max_work_files": MAX_WORK_FILES,
    }


@pytest.mark.full
def test_run_json_records_the_isolation_level(level, tmp_path):
    out = tmp_path / "run"
    evaluate(RunConfig("oracle", envs=["MathWord-v0"], limit=1, progress=False, out=out))
    run = json.loads((out / "run.json").read_text())
    assert run["sandbox"] == sandbox.isolation_record()
    assert run["sandbox"]["isolation"] == LEVEL_NAMES[level]
