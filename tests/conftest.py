"""Shared test helpers: a scripted stand-in for a language model.

``ScriptedBackend`` implements the backend contract with answers chosen by a function of the
request, so that agent and runner logic can be tested against real envs and tools without a
model. ``SteppedBackend`` is one with a running batch (continuous batching): each request
takes a scripted number of decoding steps, joins the batch when submitted and leaves when done.
Tests of the real backends live in test_backend_hf.py, test_backend_openai.py and
test_backend_openvino.py. ``chromium`` and ``browse`` run a static page in headless Chromium
(the leaderboard's and the viewer's pages), skipping a test where Chromium is not installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

# The tests that build models without naming a backend were written for the hf backend (the
# default where the openvino extra is not installed); they keep it here, subprocesses included.
os.environ.setdefault("LUMOS_GYM_BACKEND", "hf")
# Under pytest -n each worker has about a core of its own: torch's OpenMP threads, in it and in
# the commands it starts, are one per worker rather than one per core (threads past the cores
# spin against each other: the served-model docs block took 100 s beside another worker, 24 s
# alone). Set before torch is imported below.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

try:  # the tiny-model builders need the hf extra; the scripted backend does not
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
except ImportError:  # pragma: no cover - depends on the installed extras
    torch = None

from lumos_gym.models.base import (
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
    GenerationSession,
    cut_at_stop,
)
from lumos_gym.tools import make_tool


class ScriptedBackend(Backend):
    """Answers each request with ``script(request)``; records every batch it is sent.

    ``script`` may return a string, a :class:`Completion` (answered as it is: an error
    completion, say) or raise (the backend fails as a whole: an ``infra-error`` in the runner);
    a string is cut at the request's stop strings.
    """

    name = "scripted"

    def __init__(self, script: Callable[[GenerationRequest], str],
                 details: dict[str, Any] | None = None) -> None:
        self.script = script
        self.details = dict(details or {})  # what info() reports (a dtype, say)
        self.batches: list[list[GenerationRequest]] = []
        self.closed = False

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.batches.append(list(requests))
        completions = []
        for request in requests:
            answer = self.script(request)
            if isinstance(answer, Completion):
                completions.append(answer)
                continue
            text, _ = cut_at_stop(answer, request.stop)
            completions.append(
                Completion(text, "stop", input_tokens=len(request.prompt or "") // 4,
                           output_tokens=max(1, len(text) // 4), model_id="scripted")
            )
        return completions

    def info(self) -> BackendInfo:
        return BackendInfo(backend=self.name, model_id="scripted", details=dict(self.details))

    def close(self) -> None:
        self.closed = True


class SteppedBackend(ScriptedBackend):
    """A ScriptedBackend whose sessions decode like a continuous-batching engine.

    A request submitted to a session takes ``steps(request)`` decoding steps; each step of a
    collect advances every request in flight of the session, a request joins at once and
    leaves as soon as its steps are done (answered by ``script``, through ``generate``, so
    ``batches`` lists one request a finish). ``events`` logs ``(kind, request, clock)`` with
    ``kind`` "submit" or "finish" and ``clock`` the steps run so far by all its sessions.
    """

    name = "stepped"

    def __init__(
        self,
        script: Callable[[GenerationRequest], str],
        steps: Callable[[GenerationRequest], int] = lambda request: 1,
    ) -> None:
        super().__init__(script)
        self.steps = steps
        self.clock = 0
        self.events: list[tuple[str, GenerationRequest, int]] = []

    def open_session(self) -> GenerationSession:
        return SteppedSession(self)

    def finished_at(self, predicate: Callable[[GenerationRequest], bool]) -> list[int]:
        """The clocks at which requests matching ``predicate`` finished."""
        return [t for kind, r, t in self.events if kind == "finish" and predicate(r)]

    def submitted_at(self, predicate: Callable[[GenerationRequest], bool]) -> list[int]:
        """The clocks at which requests matching ``predicate`` were submitted."""
        return [t for kind, r, t in self.events if kind == "submit" and predicate(r)]


class SteppedSession(GenerationSession):
    """A session of a :class:`SteppedBackend`: requests in flight and their steps left."""

    def __init__(self, backend: SteppedBackend) -> None:
        self.backend = backend
        self.left: dict[int, list] = {}  # key -> [request, steps left]
        self.next_key = 0

    def submit(self, request: GenerationRequest) -> int:
        key, self.next_key = self.next_key, self.next_key + 1
        self.left[key] = [request, max(1, self.backend.steps(request))]
        self.backend.events.append(("submit", request, self.backend.clock))
        return key

    def collect(self, wait: bool = True) -> list[tuple[int, Completion]]:
        done: list[tuple[int, Completion]] = []
        while self.left and not done:
            self.backend.clock += 1
            for key, entry in list(self.left.items()):
                entry[1] -= 1
                if entry[1] == 0:
                    del self.left[key]
                    try:
                        (completion,) = self.backend.generate([entry[0]])
                    except Exception:
                        self.left.clear()  # the contract: a failure drops everything in flight
                        raise
                    self.backend.events.append(("finish", entry[0], self.backend.clock))
                    done.append((key, completion))
            if not wait:
                break
        return done

    @property
    def in_flight(self) -> int:
        return len(self.left)

    def close(self) -> None:
        self.left.clear()


def turn_number(request: GenerationRequest) -> int:
    """Return how many assistant turns the prompt already opened (1 for the first call)."""
    return (request.prompt or "").count("<|assistant|>")


@pytest.fixture
def scripted():
    """Build a ScriptedBackend from a function of the request."""
    return ScriptedBackend


# -- a tiny random Llama and its tokenizer, built here (no download) -----------------------------
SPECIAL_TOKENS = ["<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "the planner writes subgoals and the grounder writes actions",
    "Subgoal 1: Calculate the total number of apples.\nAction 1: R1 = Calculator(3 + 4)",
    "<|user|>\nPlease ground the subgoal to actions\n<|assistant|>\n",
    "Observation: 7 apples in all, then Answer(R1) </s>",
]
MAX_POSITIONS = 128


def build_tokenizer() -> PreTrainedTokenizerFast:
    # Byte-level symbols of the printable ASCII bytes, space (Ġ) and newline (Ċ).
    alphabet = [chr(b) for b in range(33, 127)] + ["\u0120", "\u010a"]
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    raw.train_from_iterator(CORPUS * 3, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", eos_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(
    tokenizer: PreTrainedTokenizerFast, max_positions: int = MAX_POSITIONS
) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        initializer_range=1.0,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # a zero logit never wins against ~200 random ones
        for token in SPECIAL_TOKENS:
            model.lm_head.weight[tokenizer.convert_tokens_to_ids(token)] = 0
    return model


def save_tiny_model(folder, max_positions: int = MAX_POSITIONS):
    """Build the tiny model and tokenizer and save both to ``folder``; return the folder."""
    tokenizer = build_tokenizer()
    build_model(tokenizer, max_positions).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@contextlib.contextmanager
def served(model_folder, name: str = "tiny"):
    """`lumos-gym serve MODEL` in its own process; yields its base URL once it is healthy."""
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "lumos_gym.cli", "serve", "--model", str(model_folder),
         "--served-model-name", name, "--port", str(port), "--device", "cpu"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, server.stderr.read().decode()
            assert time.monotonic() < deadline, "the server did not start in 60 s"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stderr.close()


@pytest.fixture
def loopback_server():
    """A TCP server on 127.0.0.1 that records whether a client connected: ``(port, event)``."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(3.0)
    connected = threading.Event()

    def accept() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        connected.set()
        conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    yield port, connected
    if thread.is_alive():  # wake the accept() still waiting, then close
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    thread.join(timeout=5.0)
    server.close()


@pytest.fixture
def env_servers():
    """Start `serve-env` servers in this process (``env_servers(env_id, kwargs, **options)``);
    every one is stopped after the test."""
    from lumos_gym.serving.envserver import start_env_server  # a server only where used

    started = []

    def start(env_id, kwargs=None, **options):
        server = start_env_server(env_id, kwargs or {}, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def processes_with_args(args: list[str]) -> list[int]:
    """Return the pids whose command line is exactly ``args``."""
    wanted = "\0".join(args) + "\0"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if Path(f"/proc/{entry}/cmdline").read_text(errors="replace") == wanted:
                found.append(int(entry))
        except OSError:
            continue
    return found


def poll(condition: Callable[[], Any], seconds: float) -> bool:
    """Whether ``condition()`` comes true within ``seconds`` (checked every 50 ms)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- static pages in headless Chromium ----------------------------------------------------------
def chromium() -> str:
    """Return the Chromium executable; skip the test where none is installed."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("chromium is not installed (Debian: apt-get install -y chromium; make test "
                "installs it when run as root)")


def browse(tmp_path: Path, url: str, *flags: str) -> str:
    """Load ``url`` in headless Chromium with ``flags`` (``--dump-dom``...); return its stdout."""
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={tmp_path / 'profile'}", *flags, url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# -- nothing left behind -------------------------------------------------------------------------
def _leftovers() -> list[str]:
    """Return the child processes and listening sockets this test process still holds."""
    import psutil

    me = psutil.Process()
    found = []
    for child in me.children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            command = " ".join(child.cmdline())
            # multiprocessing's resource tracker (started by a spawn pool, e.g. reproduce's
            # parallel training) lives as long as this interpreter and ends with it: not a leak
            if "multiprocessing.resource_tracker" in command:
                continue
            found.append(f"process {child.pid}: {command[:120]}")
        except psutil.Error:
            continue  # it ended while we looked
    for conn in me.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN:
            found.append(f"listening socket {conn.laddr.ip}:{conn.laddr.port}")
    return found


_WORKERS_LEFT: list[str] = []  # what pytest -n workers reported left behind (controller)


def pytest_testnodedown(node, error):
    """Collect what a pytest-xdist worker found left behind (a hook run in the controller)."""
    _WORKERS_LEFT.extend(getattr(node, "workeroutput", {}).get("left_behind", []))


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a test left a game process, a sandbox or a server behind.

    With pytest -n each worker looks for what its own tests left and sends it to the
    controller, which reports it all (a worker's own exit status does not reach the run's).
    """
    import time

    workerinput = getattr(session.config, "workerinput", None)
    if getattr(session.config.option, "numprocesses", None) and workerinput is None:
        left = list(_WORKERS_LEFT)  # the controller: its only children are the workers
    else:
        # the math tools' idle worker processes live as long as the interpreter (closed at
        # exit): close them now, as exit would, so that only what a test leaked is left
        make_tool("Calculator").close()
        deadline = time.monotonic() + 5.0
        left = _leftovers()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)  # processes being reaped and servers shutting down get a moment
            left = _leftovers()
        if workerinput is not None:
            session.config.workeroutput["left_behind"] = left
            return
    if left:
        print("\nleft behind after the tests:\n  " + "\n  ".join(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def no_leftover_sandboxes(tmp_path, monkeypatch):
    """Give the sandboxes a temp folder of their own; fail when one is left behind."""
    import tempfile

    from lumos_gym.tools.sandbox import TEMP_PREFIX

    root = tmp_path / "sandboxes"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield
    left = [p.name for p in root.iterdir() if p.name.startswith(TEMP_PREFIX)]
    assert not left, f"sandbox directories left behind: {left}"


@pytest.fixture(autouse=True, scope="session")
def clean_checkout():
    """Runs made here record this checkout's commit as clean (``git.dirty`` false).

    ``leaderboard --validate`` refuses a folder scored from a dirty checkout, and the tests run
    in working trees with edits; a test of the dirty case writes the flag itself.
    """
    from lumos_gym import gitinfo

    recorded = gitinfo._git()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gitinfo, "_git", lambda: recorded and {**recorded, "dirty": False})
        yield
