"""The rollout runner: many episodes in flight, their model asks batched per backend.

The runner keeps ``max_in_flight`` episodes running and each backend object's asks in flight
in one :class:`~lumos_gym.models.base.GenerationSession` of that backend. Each turn of its loop
it (1) starts episodes from the queue until ``max_in_flight`` are running, (2) submits every
new ask to its backend's session, (3) advances each session with asks in flight and hands every
completion that finished to its episode, whose logic runs on at once (env steps inline) until
it asks a model again or ends, and (4) records every episode that ended. An ask made in (3) is
submitted at the next turn, without waiting for the rest of any batch.

How soon a completion comes back is the backend's: ``openvino`` decodes the requests of a
session in one running batch, so a request joins it while others decode and a finished one
leaves at once (one long generation no longer holds the others); every other backend answers
all the asks of a turn with one ``generate`` call (:class:`~lumos_gym.models.base.QueuedSession`),
the round-by-round batching of earlier versions. Backends that are views of one model with a
:meth:`~lumos_gym.models.base.Backend.batch_group` (``hf`` with adapters: a planner and a
grounder) share one :class:`~lumos_gym.models.base.MixedQueuedSession`, so the asks of both
roles go in one batch. ``continuous=False`` gives every other backend the queued session, for
comparison. Prompt-prefix reuse across calls is the backend's and is the
same either way.

Whatever goes wrong in one episode (an env that raises, an agent bug, a backend error, an
over-long context) ends that episode with a status; the run goes on. A backend that fails as
a whole ends the episodes whose asks it had in flight.

A failure of the machinery rather than of the agent ends its episode with ``infra-error``: a
completion its backend marks ``infra`` (an engine that did not finish the request, a server
or connection that kept failing through the backend's retries), an exception a backend raises
(a request's own problems come back as error completions, so an exception is the engine's), or
an env's :class:`~lumos_gym.errors.InfraError` (an env server that cannot be reached). Such an
episode is played again from the start, up to ``max_infra_retries`` more times, and recorded
as ``infra-error`` only when every try failed so; the results then leave it out of the means
instead of scoring it 0. The agent's own failures (invalid actions, an over-long context, a
bug in its logic, a request its backend refuses) keep their statuses and are never retried.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
import zlib
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym

from lumos_gym.agents.base import Act, Agent, Ask, EpisodeLogic, Note, StepOutcome
from lumos_gym.agents.tokens import compact_calls
from lumos_gym.envs.base import observation_text
from lumos_gym.envs.replay import step_env
from lumos_gym.episodes import INFRA_ERROR, EpisodeRecord, EpisodeSpec
from lumos_gym.episodes import STATUSES as STATUSES  # kept importable here
from lumos_gym.errors import InfraError
from lumos_gym.models.base import (
    Backend,
    Completion,
    GenerationSession,
    MixedQueuedSession,
    QueuedSession,
    TokenTrace,
)

logger = logging.getLogger(__name__)


def call_seed(seed: int, spec: EpisodeSpec, call: int) -> int:
    """The sampling seed of one module call of a sampled (temperature above 0) episode.

    Each call gets its own seed, mixed from the agent's seed, the episode (env, arguments,
    task, episode seed) and the call's number in it: with one seed for every request, an engine
    that seeds each request (OpenVINO) drew the same random numbers for every task of a run and
    for every member of a GRPO group, so their samples were correlated or identical.
    """
    kwargs = json.dumps(dict(spec.env_kwargs), sort_keys=True, default=str)
    key = f"{seed}|{spec.env_id}|{kwargs}|{spec.task_id}|{spec.seed}|{call}"
    return zlib.crc32(key.encode("utf-8"))


@dataclass
class _Running:
    """An episode in flight."""

    spec: EpisodeSpec
    env: gym.Env | None
    logic: EpisodeLogic | None
    record: EpisodeRecord
    started: float
    pending: Ask | None = None
    in_flight: bool = False  # ``pending`` was submitted to its backend's session
    invalid_streak: int = 0
    done: bool = False
    calls: list[tuple[int, str, TokenTrace]] = field(default_factory=list)  # record_tokens
    asked: int = 0  # module calls submitted so far (each sampled call gets its own seed)
    attempt: int = 1  # this play of the episode: 1, then one more per infra-error retry


@dataclass(eq=False)
class _Batch:
    """The asks in flight on one backend object: its session and the episode of each key."""

    session: GenerationSession
    asks: dict[int, _Running] = field(default_factory=dict)


class _EnvPool:
    """Reuses env instances across episodes with the same id and constructor arguments."""

    def __init__(self) -> None:
        self._free: dict[str, list[gym.Env]] = {}
        self._all: list[gym.Env] = []

    def acquire(self, spec: EpisodeSpec) -> gym.Env:
        key = f"{spec.env_id}|{json.dumps(dict(spec.env_kwargs), sort_keys=True)}"
        free = self._free.setdefault(key, [])
        if free:
            return free.pop()
        env = gym.make(spec.env_id, **dict(spec.env_kwargs))
        self._all.append(env)
        return env

    def release(self, spec: EpisodeSpec, env: gym.Env) -> None:
        key = f"{spec.env_id}|{json.dumps(dict(spec.env_kwargs), sort_keys=True)}"
        self._free.setdefault(key, []).append(env)

    def close(self) -> None:
        for env in self._all:
            env.close()
        self._all.clear()
        self._free.clear()


class Runner:
    """Runs episodes of one agent with batched model calls.

    Args:
        agent: the agent.
        backends: the backend of each role the agent asks (roles may share one backend;
            asks to one backend object go to one session and are batched together).
        max_in_flight: episodes running at once (the most asks a backend holds at once).
        max_invalid_actions: end an episode after this many invalid actions in a row.
        wall_timeout: seconds an episode may run before it ends with ``step-limit``.
        keep_prompts: store every prompt in the turns of the record (large).
        record_tokens: ask every backend for the token ids and log-probabilities of each call
            and keep them in the record's ``tokens`` (:mod:`lumos_gym.agents.tokens`); a
            backend that cannot give them leaves its calls out.
        continuous: use each backend's own session (continuous batching where the backend
            has it); False sends each turn's asks of a backend as one ``generate`` call.
        max_infra_retries: play an episode that ended in ``infra-error`` (a failure of a
            backend or an env server, not of the agent) again from the start, up to this many
            more times; 0 records the first ``infra-error``.

    A record's ``model_s`` is the episode's share of its backends' time: each submit counts
    for the episode that made it, and each collect of a session is shared equally among the
    asks it had in flight (with one ``generate`` a turn, the call's time split among its
    requests).
    """

    def __init__(
        self,
        agent: Agent,
        backends: Mapping[str, Backend],
        *,
        max_in_flight: int = 8,
        max_invalid_actions: int = 5,
        wall_timeout: float | None = None,
        keep_prompts: bool = False,
        record_tokens: bool = False,
        continuous: bool = True,
        max_infra_retries: int = 2,
    ) -> None:
        missing = [role for role in agent.roles if role not in backends]
        if missing:
            raise ValueError(f"agent {agent.name!r} needs a backend for role(s) {missing}")
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if max_infra_retries < 0:
            raise ValueError("max_infra_retries must be 0 or more")
        self.agent = agent
        self.backends = dict(backends)
        self.max_in_flight = max_in_flight
        self.max_invalid_actions = max_invalid_actions
        self.wall_timeout = wall_timeout
        self.keep_prompts = keep_prompts
        self.record_tokens = record_tokens
        self.continuous = continuous
        self.max_infra_retries = max_infra_retries

    # ------------------------------------------------------------------------------ the loop
    def run(
        self,
        specs: Iterable[EpisodeSpec],
        *,
        on_record: Callable[[EpisodeRecord], None] | None = None,
        progress: bool = False,
    ) -> list[EpisodeRecord]:
        """Run every episode of ``specs`` and return their records in the order they ended.

        An episode that ends in ``infra-error`` goes back to the end of the queue, to start
        afresh, while it has retries left (``max_infra_retries``); only its last try is
        recorded.

        Args:
            specs: the episodes.
            on_record: called with each record as soon as its episode ends (for writing).
            progress: show a progress bar with episodes/s and tokens/s.
        """
        queue = deque((spec, 1) for spec in specs)  # each episode with its try's number
        pool = _EnvPool()
        running: list[_Running] = []
        batches: dict[Hashable, _Batch] = {}  # by _batch_key of the backend
        records: list[EpisodeRecord] = []
        bar = _Progress(len(queue)) if progress else None

        def finish(episode: _Running) -> None:
            record = episode.record
            if record.status == INFRA_ERROR and self._retry(episode):
                if episode.env is not None:
                    pool.release(episode.spec, episode.env)
                queue.append((episode.spec, episode.attempt + 1))
                return
            record.wall_s = round(time.monotonic() - episode.started, 3)
            record.env_s, record.tool_s = round(record.env_s, 6), round(record.tool_s, 6)
            record.model_s = round(record.model_s, 6)
            if self.record_tokens:
                record.tokens = compact_calls(episode.calls)
            if episode.env is not None:
                pool.release(episode.spec, episode.env)
            records.append(episode.record)
            if on_record is not None:
                on_record(episode.record)
            if bar is not None:
                bar.update(episode.record)

        try:
            while queue or running:
                while queue and len(running) < self.max_in_flight:
                    episode = self._start(*queue.popleft(), pool)
                    if episode.done:
                        finish(episode)
                    else:
                        running.append(episode)
                self._submit(running, batches)
                self._collect(running, batches)
                for episode in [e for e in running if e.done]:
                    finish(episode)
                running = [e for e in running if not e.done]
        finally:
            for batch in batches.values():
                batch.session.close()
            for episode in running:
                if episode.logic is not None:
                    episode.logic.close()
            pool.close()
            if bar is not None:
                bar.close()
        return records

    def _retry(self, episode: _Running) -> bool:
        """Whether an episode that ended in ``infra-error`` is played again (saying so)."""
        tries = self.max_infra_retries + 1
        record = episode.record
        if episode.attempt < tries:
            logger.warning("%s %s: infra-error (%s); playing it again (try %d of %d)",
                           record.env_id, record.task_id, record.reason, episode.attempt + 1,
                           tries)
            return True
        if episode.attempt > 1:
            record.reason = f"{record.reason} (on each of {episode.attempt} tries)"
        return False

    def _start(self, spec: EpisodeSpec, attempt: int, pool: _EnvPool) -> _Running:
        record = EpisodeRecord(  # the status is set when the episode ends
            spec.env_id, spec.task_id, dict(spec.env_kwargs), spec.seed, self.agent.name, ""
        )
        started = time.monotonic()
        try:
            env = pool.acquire(spec)
            first, info = env.reset(seed=spec.seed, options={"task_id": spec.task_id})
            observation = observation_text(first)
        except Exception as e:  # a broken env (or env server) ends this episode only
            record.status, record.reason = _env_failure(e), _error_text(e)
            return _Running(spec, None, None, record, started, done=True, attempt=attempt)
        record.task = observation
        if spec.agent_info:
            info = {**info, **spec.agent_info}
        logic = self.agent.episode(observation, info)
        episode = _Running(spec, env, logic, record, started, attempt=attempt)
        self._advance(episode, None)
        return episode

    def _submit(self, running: Sequence[_Running], batches: dict[Hashable, _Batch]) -> None:
        """Submit every new ask to its backend's session (opened on the backend's first ask)."""
        for episode in running:
            ask = episode.pending
            if ask is None or episode.in_flight or episode.done:
                continue
            backend = self.backends[ask.role]
            batch_key = _batch_key(backend)
            batch = batches.get(batch_key)
            if batch is None:
                if batch_key[0] == "group":  # views of one model: one mixed batch
                    session: GenerationSession = MixedQueuedSession(backend)
                elif self.continuous:
                    session = backend.open_session()
                else:
                    session = QueuedSession(backend)
                batch = batches[batch_key] = _Batch(session)
            request = replace(ask.request, logprobs=True) if self.record_tokens else ask.request
            if request.temperature > 0:
                seed = call_seed(request.seed, episode.spec, episode.asked)
                request = replace(request, seed=seed)
            episode.asked += 1
            started = time.perf_counter()
            try:
                if isinstance(batch.session, MixedQueuedSession):
                    key = batch.session.submit_for(backend, request)
                else:
                    key = batch.session.submit(request)
            except Exception as e:  # the backend failed (a request's own problem is a completion)
                error = Completion("", "error", error=_error_text(e), infra=True)
                episode.record.model_s += time.perf_counter() - started
                self._receive(episode, error)
                continue
            episode.record.model_s += time.perf_counter() - started
            batch.asks[key] = episode
            episode.in_flight = True

    def _collect(self, running: Sequence[_Running], batches: dict[Hashable, _Batch]) -> None:
        """Advance each session with asks in flight; hand every finished completion over.

        Sessions go in the order of their first episode in ``running``. With more than one
        busy, each does one unit of work in turn, so that none waits on another's long
        generation; a lone busy session waits until something finishes.
        """
        busy: dict[Hashable, _Batch] = {}
        for episode in running:
            if episode.in_flight and episode.pending is not None:
                key = _batch_key(self.backends[episode.pending.role])
                busy.setdefault(key, batches[key])
        for batch in busy.values():
            carried = list(batch.asks.values())
            started = time.perf_counter()
            try:
                finished = batch.session.collect(wait=len(busy) == 1)
            except Exception as e:  # the backend failed as a whole: each ask it held gets the error
                message = _error_text(e)
                finished = [(key, Completion("", "error", error=message, infra=True))
                            for key in batch.asks]
            share = (time.perf_counter() - started) / len(carried)
            for episode in carried:
                episode.record.model_s += share
            for key, completion in finished:
                episode = batch.asks.pop(key)
                episode.in_flight = False
                self._receive(episode, completion)

    def _receive(self, episode: _Running, completion: Completion) -> None:
        ask = episode.pending
        assert ask is not None
        episode.pending = None
        record = episode.record
        record.input_tokens += completion.input_tokens
        record.output_tokens += completion.output_tokens
        turn: dict[str, Any] = {"role": ask.role, "output": completion.text}
        if self.keep_prompts:
            turn["prompt"] = ask.request.prompt or list(ask.request.messages or ())
        if completion.tokens is not None and self.record_tokens:
            episode.calls.append((len(record.turns), ask.role, completion.tokens))
        record.turns.append(turn)
        if completion.stop_reason == "error":
            error = completion.error or "backend error"
            if completion.infra:  # the engine, server or connection failed, not the request
                status = INFRA_ERROR
            else:
                status = "context-limit" if "context length" in error else "agent-error"
            self._end(episode, status, error)
            return
        if self._timed_out(episode):
            return
        self._advance(episode, completion)

    def _advance(self, episode: _Running, value: Completion | StepOutcome | None) -> None:
        """Run the episode logic until it asks a model or ends; env steps and notes run inline."""
        while True:
            try:
                item = episode.logic.send(value) if value is not None else next(episode.logic)
            except StopIteration:
                self._end(episode, "agent-error", "the agent ended without finishing the episode")
                return
            except Exception as e:  # an agent bug ends this episode only
                self._end(episode, "agent-error", _error_text(e))
                return
            if isinstance(item, Ask):
                if item.role not in self.backends:
                    self._end(episode, "agent-error", f"no backend for role {item.role!r}")
                else:
                    episode.pending = item
                return
            if isinstance(item, Note):
                episode.record.turns.append(dict(item.turn))
                value = None
                continue
            if not isinstance(item, Act):
                self._end(episode, "agent-error", f"agent yielded {type(item).__name__}")
                return
            outcome = self._step(episode, item.action)
            if outcome is None:
                return
            value = outcome

    def _step(self, episode: _Running, action: str) -> StepOutcome | None:
        record = episode.record
        invalid_before = record.invalid_actions
        started = time.perf_counter()
        try:
            outcome = step_env(episode.env, action)
        except Exception as e:  # envs promise not to raise on actions; if one does, record it
            self._end(episode, _env_failure(e), _error_text(e))
            return None
        finally:
            record.env_s += time.perf_counter() - started
        info = outcome.info
        record.tool_s = float(info.get("tool_seconds", record.tool_s))
        record.steps = int(info.get("steps", record.steps + 1))
        record.invalid_actions = int(info.get("invalid_actions", 0))
        record.tool_errors = int(info.get("tool_errors", 0))
        record.turns.append({"action": action, "observation": outcome.observation})
        if info.get("tool_crash"):  # a tool's own bug, reported by the env: not the agent
            self._end(episode, "tool-error", str(info["tool_crash"]))
            return None
        if outcome.terminated:
            record.reward = outcome.reward
            record.metrics = dict(info.get("metrics", {}))
            record.prediction = info.get("prediction")
            record.gold_answer = info.get("gold_answer")
            if info.get("env_error"):  # the env's engine died (a game process): not the agent
                self._end(episode, "env-error", str(info["env_error"]))
            else:
                self._end(episode, "completed", None)
            return None
        if outcome.truncated:
            # envs that end episodes themselves score a cut-off episode where it stands
            so_far = info.get("metrics_so_far")
            if so_far:
                record.metrics = dict(so_far)
                record.reward = outcome.reward
            self._end(episode, "step-limit", f"the env's step limit after {record.steps} steps")
            return None
        episode.invalid_streak = (
            episode.invalid_streak + 1 if record.invalid_actions > invalid_before else 0
        )
        if episode.invalid_streak >= self.max_invalid_actions:
            self._end(episode, "invalid-action-limit", f"{episode.invalid_streak} invalid in a row")
            return None
        if self._timed_out(episode):
            return None
        return outcome

    def _timed_out(self, episode: _Running) -> bool:
        if self.wall_timeout is None:
            return False
        if time.monotonic() - episode.started <= self.wall_timeout:
            return False
        self._end(episode, "step-limit", f"wall timeout of {self.wall_timeout} s")
        return True

    def _end(self, episode: _Running, status: str, reason: str | None) -> None:
        if episode.done:
            return
        episode.done = True
        episode.pending = None
        episode.record.status = status
        episode.record.reason = reason
        if episode.logic is not None:
            episode.logic.close()


def _batch_key(backend: Backend) -> tuple[str, Hashable]:
    """The batch a backend's asks join: its batch group's (views of one model), else its own."""
    group = backend.batch_group()
    return ("group", group) if group is not None else ("backend", id(backend))


def _env_failure(error: BaseException) -> str:
    """The status of an episode whose env raised ``error``: ``env-error``, or ``infra-error``.

    ``infra-error`` when the error, or one of its causes, is an :class:`InfraError` (an env
    server that cannot be reached or stopped answering).
    """
    seen: BaseException | None = error
    for _ in range(8):  # the chain of causes, bounded
        if seen is None:
            break
        if isinstance(seen, InfraError):
            return INFRA_ERROR
        seen = seen.__cause__ or seen.__context__
    return "env-error"


def _error_text(error: BaseException) -> str:
    """Return ``Type: message`` and the innermost frame of a traceback, on one line."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


class _Progress:
    """A tqdm bar showing episodes/s, tokens/s and the status counts.

    Without a terminal (stderr is a log file or a pipe, where tqdm draws nothing), a plain line
    goes to stderr instead when a tenth of the episodes more have ended, when an episode ends
    :attr:`LINE_EVERY_S` seconds or more after the last line, and after the last episode.
    """

    #: Seconds after which the next episode to end prints a line, whatever the count.
    LINE_EVERY_S = 30.0

    def __init__(self, total: int) -> None:
        from tqdm import tqdm

        # disable=None: no bar when stderr is not a terminal (a log file gets no \r updates)
        self.bar = tqdm(total=total, unit="ep", desc="episodes", dynamic_ncols=True, disable=None)
        self.started = time.monotonic()
        self.tokens = 0
        self.counts: dict[str, int] = {}
        self.total, self.done = total, 0
        self.lines = bool(self.bar.disable)  # the plain lines stand in for the bar
        self.last_line = self.started

    def update(self, record: EpisodeRecord) -> None:
        self.tokens += record.output_tokens
        self.counts[record.status] = self.counts.get(record.status, 0) + 1
        self.done += 1
        elapsed = max(time.monotonic() - self.started, 1e-6)
        self.bar.set_postfix(tok_s=f"{self.tokens / elapsed:.1f}", **self.counts)
        self.bar.update(1)
        if self.lines:
            self._line(elapsed)

    def _line(self, elapsed: float) -> None:
        now = time.monotonic()
        tenth = self.done % max(1, self.total // 10) == 0 or self.done == self.total
        if not tenth and now - self.last_line < self.LINE_EVERY_S:
            return
        self.last_line = now
        counts = ", ".join(f"{status} {n}" for status, n in sorted(self.counts.items()))
        print(f"episodes {self.done}/{self.total} ({self.done / elapsed:.2f} ep/s, "
              f"{self.tokens / elapsed:.1f} tok/s; {counts})", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()
