"""Tests of the sandbox (lumos_gym.tools.sandbox) and the Code tool (lumos_gym.tools.code).

Every test runs real child processes. Each one is bounded in time (small timeouts), and an
autouse fixture checks that no sandbox directory and no child process is left behind.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest
from conftest import poll, processes_with_args
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos_gym.actions import Action
from lumos_gym.errors import SandboxError, ToolError, UndefinedVariableError
from lumos_gym.tools import base as tools_base
from lumos_gym.tools import make_tool, sandbox
from lumos_gym.tools.base import ToolContext
from lumos_gym.tools.code import Code, prepare_code, python_literal, split_literals
from lumos_gym.tools.sandbox import NO_ISOLATION, TEMP_PREFIX, isolation, run_python, try_isolation

HAS_NETNS = isolation(False).network
HAS_PIDNS = isolation(False).processes
IS_ROOT = os.geteuid() == 0
# The tools that close the filesystem, each tried on its own where it works.
TOOLS = ("bwrap", "unshare")


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        found = tuple(int(p) for p in platform.release().split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return found >= (major, minor)


# Where max_processes can be enforced: RLIMIT_NPROC in our own user namespace (non-root), or
# the PID namespace's pid_max (root, Linux 6.14+).
PROCESS_BOUND = (
    HAS_PIDNS and _kernel_at_least(6, 14)
    if IS_ROOT
    else isolation(False).user and HAS_PIDNS
)


def _children(pid: int) -> list[int]:
    """Return the pids whose parent is ``pid`` (zombies included)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


@pytest.fixture(autouse=True)
def no_leaks(tmp_path, monkeypatch):
    """Give each test its own temp root and fail if a sandbox dir or child process remains."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    before = set(_children(os.getpid()))
    yield root
    assert not list(root.iterdir()), "a sandbox working directory was left behind"
    left = set(_children(os.getpid())) - before
    assert not left, f"child processes left behind: {sorted(left)}"


def use_isolation(monkeypatch, tool: str) -> None:
    """Make run_python use ``tool`` (``"bwrap"``, ``"unshare"``), or nothing for ``"plain"``."""
    if tool == "plain":
        monkeypatch.setattr(sandbox, "isolation", lambda network: NO_ISOLATION)
        monkeypatch.setattr(sandbox, "_warn_unisolated", lambda missing: None)  # tested apart
        return
    if try_isolation(tool, False) is None:
        pytest.skip(f"{tool} cannot isolate here (not installed, or namespaces refused)")
    monkeypatch.setattr(
        sandbox, "isolation", lambda network: try_isolation(tool, network) or NO_ISOLATION
    )


@pytest.fixture(params=[*TOOLS, "plain"])
def mode(request, monkeypatch):
    """Run a test with each isolating tool that works here, and once without any (the fallback)."""
    use_isolation(monkeypatch, request.param)
    return request.param


def code_run(args: str, variables: dict[str, str] | None = None, outputs=("R9",), **options):
    tool = Code(**{"timeout": 5.0, **options})
    return tool.run(Action(tuple(outputs), "Code", args), ToolContext(variables=variables or {}))


# --- run_python ---------------------------------------------------------------------------


def test_print_and_exit_status(mode):
    result = run_python("print('hello', 6 * 7)")
    assert result.ok
    assert result.stdout == "hello 42\n"
    assert (result.returncode, result.signal, result.timed_out) == (0, None, False)

    failed = run_python("import sys; print('bye'); sys.exit(3)")
    assert (failed.returncode, failed.signal, failed.stdout) == (3, None, "bye\n")
    assert not failed.ok


def test_exception_traceback_names_the_program():
    result = run_python("x = 1\ny = x / 0\n")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "ZeroDivisionError: division by zero"
    assert 'File "main.py", line 2' in result.stderr
    assert "<string>" not in result.stderr  # the bootstrap frame is hidden


def test_stdin_and_output_truncation():
    assert run_python("print(input()[::-1])", stdin="abc\n").stdout == "cba\n"
    assert run_python("print(input())").returncode == 1  # EOF when no stdin is given
    big = run_python("import sys; sys.stdout.write('x' * 100_000)", max_output_bytes=1000)
    assert big.ok and big.truncated
    assert big.stdout == "x" * 1000


def test_signal_is_reported(mode):
    result = run_python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert (result.returncode, result.signal) == (-15, "SIGTERM")


@pytest.mark.full
def test_wall_timeout_kills_an_infinite_loop(mode):
    result = run_python("while True:\n    pass\n", timeout=1.0)
    assert result.timed_out and result.signal == "SIGKILL"


def test_wall_timeout_kills_a_sleeper():
    result = run_python("import time; time.sleep(60)", timeout=0.5)
    assert result.timed_out


@pytest.mark.full
def test_cpu_limit_kills_with_sigxcpu():
    result = run_python("while True:\n    pass\n", timeout=5.0, cpu_seconds=1)
    assert not result.timed_out
    assert result.signal == "SIGXCPU"


def test_rlimits_cannot_be_raised():
    result = run_python(
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_AS)\n"
        "print(soft >> 20, hard >> 20)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (hard * 2, hard * 2))\n",
        memory_mb=300,
    )
    assert result.stdout == "300 300\n"
    assert result.returncode == 1 and "ValueError" in result.stderr


def test_memory_hog_fails():
    result = run_python("data = bytearray(2 * 10**9)\nprint('allocated')", memory_mb=256)
    assert not result.ok
    assert "allocated" not in result.stdout
    assert "MemoryError" in result.stderr


def test_huge_file_write_fails(no_leaks):
    result = run_python(
        "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (3 << 20))\n", max_file_mb=1
    )
    assert result.returncode == 1
    assert "File too large" in result.stderr


def test_background_child_does_not_hold_the_run(mode):
    # The child keeps stdout open after the program ends; the run must not wait for it.
    program = "import subprocess; subprocess.Popen(['sleep', '30']); print('started')"
    result = run_python(program, timeout=10.0)
    assert result.ok and result.stdout == "started\n"  # ok: not held until the 10 s timeout


def test_threads_and_subprocesses_work_in_the_normal_case():
    program = (
        "import subprocess, threading\n"
        "out = []\n"
        "ts = [threading.Thread(target=out.append, args=(i,)) for i in range(16)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(len(out), subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout)"
    )
    result = run_python(program)
    assert result.ok, result.stderr
    assert result.stdout.split() == ["16", "sub"]


@pytest.mark.skipif(not HAS_PIDNS, reason="no PID namespace: setsid() children can escape")
def test_fork_loop_is_contained():
    token = f"3.{random.randrange(10**8):08d}"  # a unique `sleep` argument, 3 s at most
    attempts = 600
    program = (
        "import os\n"
        "n = 0\n"
        f"for _ in range({attempts}):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        try:\n"
        "            os.setsid()\n"  # leave the process group, as a daemon would
        f"            os.execv('/bin/sleep', ['sleep', '{token}'])\n"
        "        finally:\n"
        "            os._exit(0)\n"
        "    n += 1\n"
        "print(n)\n"
    )
    result = run_python(program, timeout=10.0, max_processes=64)
    assert result.ok, result.stderr
    forked = int(result.stdout)
    assert forked > 0
    if PROCESS_BOUND:
        assert forked < 301  # pid_max's floor for root, RLIMIT_NPROC = 64 otherwise
    deadline = time.monotonic() + 2.0
    while processes_with_args(["sleep", token]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with_args(["sleep", token]) == []


def test_parent_environment_is_not_inherited(monkeypatch):
    monkeypatch.setenv("LUMOS_SECRET", "hunter2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    program = (
        "import os, subprocess\n"
        "print(sorted(os.environ))\n"
        "print(subprocess.run(['sh', '-c', 'echo [$LUMOS_SECRET]'], capture_output=True, "
        "text=True).stdout)"
    )
    result = run_python(program)
    assert result.ok, result.stderr
    names = ast.literal_eval(result.stdout.splitlines()[0])
    assert set(names) <= set(sandbox.BASE_ENV) | {"HOME", "TMPDIR", "PWD"}  # PWD: bwrap's
    assert "hunter2" not in result.stdout and "sk-test" not in result.stdout
    assert "[]" in result.stdout


def test_hash_seed_is_fixed():
    program = "print(hash('lumos'), list({'a', 'b', 'c', 'd'}))"
    assert run_python(program).stdout == run_python(program).stdout


def test_cwd_is_a_fresh_temp_dir_that_is_removed(no_leaks):
    result = run_python(
        "import os\nopen('scratch.txt', 'w').write('x')\n"
        "print(os.getcwd()); print(os.environ['HOME']); print(sorted(os.listdir('.')))"
    )
    assert result.ok, result.stderr
    cwd, home, listing = result.stdout.splitlines()
    assert cwd == home
    assert Path(cwd).parent == no_leaks and Path(cwd).name.startswith(TEMP_PREFIX)
    assert listing == "['main.py', 'scratch.txt']"
    assert not Path(cwd).exists()


# --- the filesystem is closed ---------------------------------------------------------------

CHECKOUT = Path(__file__).resolve().parents[1]

# Runs in the box: tries each escape and prints, per escape, what came of it.
ESCAPES = """\
import json, os, sys
paths = json.loads({paths!r})
outcome = {{}}

def attempt(name, action):
    try:
        outcome[name] = "succeeded: " + repr(action())[:80]
    except Exception as e:
        outcome[name] = "failed: " + type(e).__name__

def chdir_and_list(path):
    # A checkout that holds its .venv (as `make` makes it) shows that folder, Python's prefix,
    # mounted read-only: anything else it shows is an escape.
    os.chdir(path)
    python = (os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix))
    here = os.path.realpath(".")
    names = [n for n in os.listdir(".")
             if not any(p.startswith(os.path.join(here, n) + os.sep) or p == os.path.join(here, n)
                        for p in python)]
    return names[0]  # IndexError (failed) when the box shows nothing of the checkout

def other_pids():
    return [p for p in os.listdir("/proc") if p.isdigit() and int(p) > 2]

attempt("read /etc/passwd", lambda: open("/etc/passwd").read())
attempt("read a file of $HOME", lambda: open(paths["home_file"]).read())
attempt("read a file of the checkout", lambda: open(paths["checkout_file"]).read())
attempt("write outside the box", lambda: open(paths["outside_file"], "w").write("x"))
attempt("write to /tmp", lambda: open(paths["tmp_file"], "w").write("x"))
attempt("chdir to the checkout and list it", lambda: chdir_and_list(paths["checkout"]))
attempt("list a folder outside the box", lambda: os.listdir(paths["outside"]).index("mark.txt"))
attempt("read another process's cmdline", lambda: open(paths["cmdline"]).read())
attempt("see other processes", lambda: other_pids()[0])
print(json.dumps(outcome))
"""


def _home_file() -> Path | None:
    """A regular file in the caller's home (not under Python's prefixes), if there is one."""
    home = Path.home()
    try:
        return next(
            (p for p in sorted(home.iterdir()) if p.is_file() and os.access(p, os.R_OK)), None
        )
    except OSError:
        return None


def _try_escapes(tmp_path: Path) -> dict[str, str]:
    """Run ESCAPES in the sandbox with paths of this machine; return each escape's outcome."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mark.txt").write_text("host")
    home_file = _home_file()
    if home_file is None:
        pytest.skip(f"no readable file in {Path.home()} to try to read")
    paths = {
        "home_file": str(home_file),
        "checkout_file": str(CHECKOUT / "pyproject.toml"),
        "checkout": str(CHECKOUT),
        "outside": str(outside),
        "outside_file": str(outside / "escaped.txt"),
        "tmp_file": f"/tmp/lumos-sandbox-escaped-{random.randrange(10**9)}",
        "cmdline": f"/proc/{os.getpid()}/cmdline",
    }
    try:
        result = run_python(ESCAPES.format(paths=json.dumps(paths)), timeout=20.0)
        assert result.ok, result.stderr
        return json.loads(result.stdout)
    finally:
        wrote = [p for p in (paths["outside_file"], paths["tmp_file"]) if Path(p).exists()]
        for path in wrote:
            Path(path).unlink()


@pytest.mark.parametrize("tool", TOOLS)
def test_no_escape_from_the_box(tool, monkeypatch, tmp_path):
    use_isolation(monkeypatch, tool)
    outcome = _try_escapes(tmp_path)
    assert len(outcome) == 9
    escaped = {name: how for name, how in outcome.items() if not how.startswith("failed")}
    assert not escaped, f"{tool}: escaped the sandbox: {escaped}"
    assert not (tmp_path / "outside" / "escaped.txt").exists()


def test_the_escapes_succeed_without_isolation(monkeypatch, tmp_path):
    # The control for test_no_escape_from_the_box: without a box, the same attempts succeed.
    use_isolation(monkeypatch, "plain")
    outcome = _try_escapes(tmp_path)
    for name in ("read /etc/passwd", "read a file of $HOME", "read a file of the checkout",
                 "write outside the box", "chdir to the checkout and list it",
                 "list a folder outside the box", "read another process's cmdline"):
        assert outcome[name].startswith("succeeded"), (name, outcome[name])


# --- a killed caller leaves no sandbox behind ---------------------------------------------

# Runs as the caller that gets killed: starts a long sandboxed run with the given isolation.
CALLER = """\
import sys
from lumos_gym.tools import sandbox
tool, program = sys.argv[1], sys.argv[2]
if tool == "plain":
    sandbox.isolation = lambda network: sandbox.NO_ISOLATION
else:
    sandbox.isolation = lambda network: sandbox.try_isolation(tool, network)
sandbox.run_python(program, timeout=600)
"""


def _sandbox_processes(caller: int, token: str, workdirs: Path, started: bool = False) -> list[int]:
    """Pids of the processes a run of ``caller`` started: bwrap/unshare, boot, program, child.

    The program's child is ``sleep TOKEN``; bwrap and unshare's boot program name a working
    directory under ``workdirs``; a boot program's PARENT argument is ``caller``. With
    ``started``, only the first: the sandbox is then up.
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (os.getpid(), caller):
            continue
        try:
            args = Path(f"/proc/{entry}/cmdline").read_text(errors="replace").split("\0")
        except OSError:
            continue
        sleeper = args[:2] == ["sleep", token]
        box = any(str(workdirs) in arg for arg in args)
        boot = sandbox._BOOT in args and args[args.index(sandbox._BOOT) + 2] == str(caller)
        if sleeper or (not started and (box or boot)):
            found.append(int(entry))
    return found


@pytest.mark.parametrize("tool", [*TOOLS, "plain"])
def test_a_killed_caller_leaves_no_sandbox_behind(tool, monkeypatch, tmp_path):
    use_isolation(monkeypatch, tool)  # skips a tool that does not work here
    token = f"600.{random.randrange(10**8):08d}"  # a unique `sleep` argument
    # In a PID namespace the program's own child must go too; without one, the program
    # (which becomes `sleep`).
    program = (
        f"import os; os.execv('/bin/sleep', ['sleep', '{token}'])" if tool == "plain"
        else f"import subprocess; subprocess.run(['sleep', '{token}'])"
    )
    workdirs = tmp_path / "killed"
    workdirs.mkdir()
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "TMPDIR": str(workdirs)}
    caller = subprocess.Popen([sys.executable, "-c", CALLER, tool, program], env=env)
    try:
        started = poll(lambda: _sandbox_processes(caller.pid, token, workdirs, True), 30.0)
        assert started, "the sandboxed program did not start"
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait()
        gone = poll(lambda: not _sandbox_processes(caller.pid, token, workdirs), 10.0)
        assert gone, f"{tool}: left behind: {_sandbox_processes(caller.pid, token, workdirs)}"
    finally:
        caller.kill()
        caller.wait()
        for pid in _sandbox_processes(caller.pid, token, workdirs):
            os.kill(pid, signal.SIGKILL)


CONNECT = (
    "import socket\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', {port}), timeout=1.0).close()\n"
    "    print('connected')\n"
    "except OSError as e:\n"
    "    print('refused', e)\n"
)


@pytest.mark.skipif(not HAS_NETNS, reason="this OS refuses network namespaces (unshare -n/-rn)")
def test_network_is_cut(loopback_server):
    port, connected = loopback_server
    result = run_python(CONNECT.format(port=port), timeout=5.0)
    assert result.network_isolated
    assert result.stdout.startswith("refused"), result.stdout
    assert not connected.wait(0.2)


def test_network_allowed_reaches_the_loopback_server(loopback_server):
    # The control for test_network_is_cut: the same probe succeeds when the network is on.
    port, connected = loopback_server
    result = run_python(CONNECT.format(port=port), timeout=5.0, network=True)
    assert not result.network_isolated
    assert result.stdout == "connected\n", result.stdout + result.stderr
    assert connected.wait(3.0)


def test_warns_once_when_the_network_cannot_be_cut(monkeypatch):
    monkeypatch.setattr(sandbox, "isolation", lambda network: NO_ISOLATION)
    monkeypatch.setattr(sandbox, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = run_python("print(1)")
        second = run_python("print(2)")
        allowed = run_python("print(3)", network=True)
    assert [first.stdout, second.stdout, allowed.stdout] == ["1\n", "2\n", "3\n"]
    assert not first.network_isolated
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "\n" not in messages[0]
    assert "NOT isolated from the filesystem, the network, other processes" in messages[0]


def test_bad_limits_are_rejected():
    with pytest.raises(ValueError, match="timeout"):
        run_python("pass", timeout=0)
    with pytest.raises(ValueError, match="memory_mb"):
        run_python("pass", memory_mb=-1)


# --- the Code tool: text handling (no process) --------------------------------------------


def test_spec_is_the_lumos_interface():
    assert Code.spec.describe() == (
        "Code(pseudo_code): Generate a Python function that corresponds to the pseudo code"
    )
    assert isinstance(make_tool("Code", timeout=2.0), Code)
    assert tools_base.TOOLS.get("Code") is Code


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("24", "24"),
        (" 7 ", "7"),
        ("007", "7"),
        ("2.50", "2.5"),
        ("1e3", "1000.0"),
        ("-3", "(-3)"),
        ("Paris", "'Paris'"),
        ("1,000", "'1,000'"),
        ("inf", "'inf'"),
        ("it's", '"it\'s"'),
    ],
)
def test_python_literal(value, literal):
    assert python_literal(value) == literal


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_python_literal_round_trips(value):
    parsed = ast.literal_eval(python_literal(value))
    if isinstance(parsed, str):
        assert parsed == value
    elif isinstance(parsed, int):  # integers stay exact, also beyond 2**53
        assert parsed == int(value.strip())
    else:
        assert parsed == float(value.strip())


def test_split_literals_finds_strings_and_comments():
    text = "x = 'a#b' + \"\"\"it's\"\"\" # note\\nR1"
    assert split_literals(text) == [
        ("code", "x = "),
        ("string", "'a#b'"),
        ("code", " + "),
        ("string", '"""it\'s"""'),
        ("code", " "),
        ("comment", "# note"),
        ("code", "\\nR1"),
    ]
    assert split_literals(r"s = 'don\'t'") == [("code", "s = "), ("string", r"'don\'t'")]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab'\"#\\n =R1", max_size=40))
def test_split_literals_is_lossless(text):
    assert "".join(piece for _, piece in split_literals(text)) == text


def test_prepare_code_expands_newlines_and_variables_outside_strings():
    variables = {"R1": "24", "R2": "Paris"}
    source = prepare_code(r'x = R1 + 1\ny = "R2\n"; R2 # R1\nx', variables)
    assert source == 'x = 24 + 1\ny = "R2\\n"; \'Paris\' # R1\nx'
    with pytest.raises(UndefinedVariableError, match="R3"):
        prepare_code("R3 + 1", variables)
    assert prepare_code("print('R3')", variables) == "print('R3')"  # not a reference


# --- the Code tool: end to end ------------------------------------------------------------


def test_code_returns_the_last_expression():
    assert code_run("x = 6; x * 7").values == ("42",)
    assert code_run("print('hi')").values == ("hi",)  # print() returns None: printed once
    assert code_run(r"def f(n):\n    return n * 2\nf(21)").values == ("42",)
    assert code_run(r'x = "a\nb"; len(x)').values == ("3",)


def test_code_substitutes_numbers_and_strings():
    variables = {"R1": "24", "R2": "Paris", "R3": "-3"}
    assert code_run("R1 / 4 + R3 ** 2", variables).values == ("15.0",)
    assert code_run("R2.upper() + '!'", variables).values == ("PARIS!",)
    assert code_run('f"{R2} is {R1} km away"', variables).values == ("Paris is 24 km away",)
    with pytest.raises(UndefinedVariableError):
        code_run("R7 + 1", variables)


def test_code_several_outputs_and_no_output():
    tool = Code(timeout=5.0)
    result = tool.run(Action(("R1", "R2"), "Code", "divmod(17, 5)"), ToolContext())
    assert result.values == ("3", "2")
    with pytest.raises(ToolError, match="2 values"):
        tool.run(Action(("R1", "R2"), "Code", "17"), ToolContext())
    bare = tool.run(Action((), "Code", "x = 1"), ToolContext())
    assert bare.text == "(no output)"
    with pytest.raises(ToolError, match="printed nothing"):
        tool.run(Action(("R1",), "Code", "x = 1"), ToolContext())


def test_code_errors_carry_the_traceback_message():
    with pytest.raises(ToolError, match=r"^NameError: name 'x' is not defined$"):
        code_run("x + 1")
    with pytest.raises(ToolError, match="SyntaxError") as info:
        code_run("print(")
    assert not isinstance(info.value, SandboxError)
    with pytest.raises(ToolError, match=r"SyntaxError: .*\(line 2\)"):
        code_run(r"x = 1\ny = (")
    with pytest.raises(ToolError, match="SyntaxError"):
        code_run("If 141 % 1 == 0, 1, 0")  # Lumos pseudo code is not Python


def test_code_timeout_and_memory_raise_sandbox_errors():
    with pytest.raises(SandboxError, match=r"^timed out after 0\.5 s$"):
        code_run("while True: pass", timeout=0.5)
    with pytest.raises(SandboxError, match="out of memory"):
        code_run("bytearray(2 * 10**9)", memory_mb=256)
    with pytest.raises(SandboxError, match="SIGSEGV"):
        code_run("import ctypes; ctypes.string_at(0)")


def test_code_shell_runs_inside_the_sandbox_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LUMOS_SECRET", "hunter2")
    out = code_run(
        "import os; os.system('echo [$LUMOS_SECRET] > marker.txt; pwd'); "
        "open('marker.txt').read().strip()"
    )
    lines = out.values[0].splitlines()
    assert lines[-1] == "[]"  # the shell saw no secret
    assert Path(lines[0]).name.startswith(TEMP_PREFIX)  # it ran in the sandbox's directory
    assert not (tmp_path / "marker.txt").exists()  # and left nothing in ours
    assert not Path(lines[0]).exists()
