"""Run the episodes of an evaluation on a Ray cluster (``lumos-gym evaluate --ray [ADDRESS]``).

The driver (the ``lumos-gym evaluate`` process) stays the only writer of ``episodes.jsonl``:
it plans the episodes, starts ``workers`` Ray actors, and hands each actor chunks of
episodes (``chunk`` at a time, two chunks queued per actor so none waits between them).
Every actor builds its own envs, agent and model backends once and runs its chunks with the
ordinary batched :class:`~lumos_gym.agents.runner.Runner`; the records come back to the
driver, which appends them one by one as each chunk finishes. A killed driver therefore
loses at most the chunks in flight, and ``--resume`` runs exactly the episodes not written.

Models: with the ``hf`` or ``vllm`` backend each actor loads its own copy (give actors GPUs
with ``worker_gpus``); with ``--backend openai --base-url URL`` the actors are clients of one
served model, which batches their requests. Envs and agents must be importable on every node
(an installed lumos-gym, plus plugins registered through the ``lumos_gym.envs`` entry
points); local paths (adapters, model folders) are made absolute here and must exist on every
node (a shared file system, or the same checkout).

Ray is an optional dependency (``pip install 'lumos-gym[ray]'``).
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from lumos_gym.agents.base import FILE_MODULE_PREFIX, Agent
from lumos_gym.agents.runner import EpisodeRecord, EpisodeSpec, Runner, _Progress
from lumos_gym.envs import load_plugins
from lumos_gym.errors import LumosGymError
from lumos_gym.leaderboard.backends import agent_backends
from lumos_gym.leaderboard.provenance import fingerprint, provenance
from lumos_gym.leaderboard.usage import (
    add_usage,
    counted_backends,
    open_cache,
    role_usage,
    usage_counts,
)
from lumos_gym.models.base import Backend
from lumos_gym.models.caching import Usage


class DistributedError(LumosGymError):
    """Ray is missing, the cluster cannot be reached, or a worker failed."""


def _ray() -> Any:
    try:
        import ray  # optional extra: lumos-gym[ray]
    except ImportError:
        raise DistributedError(
            "--ray needs Ray: pip install 'lumos-gym[ray]' (or pip install ray)"
        ) from None
    return ray


def _absolute(value: str | None) -> str | None:
    """``value`` made absolute when it names an existing local path (workers' cwd differs)."""
    if value and not value.startswith(("hf:", "gguf:")) and Path(value).expanduser().exists():
        return str(Path(value).expanduser().resolve())
    if value and value.startswith("hf:") and Path(value[3:]).expanduser().exists():
        return "hf:" + str(Path(value[3:]).expanduser().resolve())
    return value


def portable_options(models: Any) -> Any:
    """``models`` (:class:`~lumos_gym.models.factory.ModelOptions`) with local paths absolute."""
    return replace(
        models, model=_absolute(models.model), planner=_absolute(models.planner),
        grounder=_absolute(models.grounder),
        adapters={role: _absolute(path) or path for role, path in models.adapters.items()},
    )


class EpisodeWorker:
    """One Ray actor: an agent with its backends, running chunks of episodes.

    Args:
        agent: the agent (pickled to the actor).
        models: how to build the backends (ignored when ``backends`` is given).
        backends: ready backends per role, when they can be pickled (a scripted backend).
        runner: the :class:`Runner` settings (``max_in_flight``, ``wall_timeout``...).
        cache: the request cache folder of the run (``--cache``; an absolute path, shared by
            every worker: each appends to a file of its own).
    """

    def __init__(
        self,
        agent: Agent,
        models: Any,
        backends: Mapping[str, Backend] | None,
        runner: Mapping[str, Any],
        cache: str | None = None,
    ) -> None:
        load_plugins()
        self.agent = agent
        if backends is None and agent.roles and models.backend in ("hf", "vllm", "openvino"):
            try:  # one loading bar per actor drowns the driver's
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            except ImportError:
                pass
        self.built = counted_backends(agent_backends(agent, models, backends), open_cache(cache))
        self.runner = Runner(agent, self.built, **dict(runner))

    def describe(self, argv: Sequence[str] | None) -> dict[str, Any]:
        """The fingerprint and provenance of this worker's agent, models and machine."""
        return {"fingerprint": fingerprint(self.agent, self.built),
                "provenance": provenance(self.agent, self.built, argv)}

    def run(self, specs: Sequence[EpisodeSpec]) -> list[EpisodeRecord]:
        """Run ``specs`` and return their records."""
        return self.runner.run(specs)

    def usage(self) -> dict[str, dict[str, int]]:
        """This worker's model calls so far, per role (:class:`~lumos_gym.models.caching.Usage`)."""
        return usage_counts(role_usage(self.built))

    def node(self) -> str:
        """The name of the machine this worker runs on."""
        return os.uname().nodename

    def close(self) -> None:
        """Close the backends."""
        self.built.close()


class RayPool:
    """Ray actors that run episodes for the driver (see the module docstring).

    Args:
        agent: the agent.
        models: how every worker builds its backends.
        backends: ready (picklable) backends per role instead of ``models``.
        runner: :class:`Runner` settings of every worker.
        address: a Ray address (``auto``, ``ray://host:10001``, ``host:6379``); None or
            ``local`` joins the Ray of this process or starts a local one.
        workers: actors to start (default: the cluster's CPUs / ``worker_cpus``, or its GPUs
            / ``worker_gpus``, at most ``max_workers``).
        worker_cpus: CPUs reserved per actor.
        worker_gpus: GPUs reserved per actor (a fraction shares one GPU).
        max_workers: never more actors than this (the episodes to run).
        cache: the request cache folder every worker answers repeated requests from
            (``--cache``); it must be reachable at the same path on every node.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        models: Any = None,
        backends: Mapping[str, Backend] | None = None,
        runner: Mapping[str, Any] | None = None,
        address: str | None = None,
        workers: int | None = None,
        worker_cpus: float = 1.0,
        worker_gpus: float = 0.0,
        max_workers: int | None = None,
        cache: str | Path | None = None,
    ) -> None:
        if type(agent).__module__.startswith(FILE_MODULE_PREFIX):
            raise DistributedError(
                "an agent from a file (path/to/file.py:Class) cannot run on Ray workers, which "
                "cannot import that file; put it in a module importable on every node and name "
                "it package.module:Class"
            )
        ray = _ray()
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            target = None if address in (None, "", "local") else address
            if target is not None:
                _check_reachable(target)
            try:
                ray.init(address=target, include_dashboard=False, log_to_driver=True,
                         configure_logging=True, logging_level="WARNING")
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise DistributedError(f"cannot reach the Ray cluster at {address!r}: {e}") from e
            self.started = True
        try:
            resources = ray.cluster_resources()
            if workers is None:
                fits = int(resources.get("CPU", 1) // max(worker_cpus, 1e-9))
                if worker_gpus > 0:
                    fits = min(fits, int(resources.get("GPU", 0) // worker_gpus))
                workers = max(1, fits)
            if max_workers is not None:
                workers = max(1, min(workers, max_workers))
            if workers < 1:
                raise DistributedError(f"--workers must be at least 1, not {workers}")
            for name, each in (("CPU", worker_cpus), ("GPU", worker_gpus)):
                have = float(resources.get(name, 0.0))
                if each > 0 and workers * each > have + 1e-9:  # the rest would wait forever
                    raise DistributedError(
                        f"{workers} worker(s) x {each:g} {name} each = {workers * each:g} {name}, "
                        f"but the Ray cluster has {have:g}: ask fewer --workers"
                        + (" or a smaller --worker-gpus" if name == "GPU" else "")
                        + ", or add nodes"
                    )
            self.resources = {k: v for k, v in resources.items() if not k.startswith("node:")}
            self.agent_name = agent.name
            # Ray does not restart actors: run() replaces a dead one itself, so that the
            # chunks queued on it fail at once and plainly (ActorDiedError), never half-sent
            actor = ray.remote(EpisodeWorker).options(
                num_cpus=worker_cpus, num_gpus=worker_gpus, max_restarts=0, max_task_retries=0,
            )
            options = portable_options(models) if models is not None else None
            for what, value in (("agent", agent), ("backends", backends)):
                try:
                    ray.cloudpickle.dumps(value)
                except Exception as e:
                    raise DistributedError(
                        f"the {what} cannot be sent to Ray workers ({type(e).__name__}: {e}); "
                        "give model options (models=ModelOptions(...)) so that each worker "
                        "builds its own backends"
                    ) from e
            folder = str(Path(cache).expanduser().resolve()) if cache is not None else None
            self._new_actor = lambda: actor.remote(agent, options, backends, dict(runner or {}),
                                                   folder)
            self.actors = [self._new_actor() for _ in range(workers)]
        except BaseException:
            self._shutdown()
            raise

    # ---------------------------------------------------------------------------- driver side
    def _get(self, refs: Any) -> Any:
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayError as e:
            raise DistributedError(f"a Ray worker failed: {_cause(e)}") from e

    def describe(self, argv: Sequence[str] | None) -> dict[str, Any]:
        """Worker 0's fingerprint and provenance, plus the cluster's layout."""
        described = self._get(self.actors[0].describe.remote(argv))
        nodes = self._get([a.node.remote() for a in self.actors])
        described["provenance"]["ray"] = {
            "workers": len(self.actors), "nodes": len(set(nodes)),
            "resources": self.resources,
        }
        return described

    def run(
        self,
        specs: Sequence[EpisodeSpec],
        *,
        chunk: int,
        on_record: Callable[[EpisodeRecord], None],
        progress: bool = False,
    ) -> list[int]:
        """Run ``specs`` on the actors; ``on_record`` gets every record as its chunk returns.

        Chunks hold at most ``chunk`` episodes (the runner's batch), fewer when that spreads
        a small run over more workers. When a worker process dies (a crash in native code,
        out of memory), Ray starts it again and its chunk is run again one episode at a time;
        an episode that kills its worker alone ends as ``env-error``, like any crashed episode.
        Returns how many episodes each worker ran.

        Raises:
            DistributedError: a worker raised (a bug, not an episode's failure: the runner
                turns those into statuses); the records handed to ``on_record`` stay.
        """
        size = max(1, min(chunk, math.ceil(len(specs) / len(self.actors))))
        # (episodes, suspect): a suspect is one episode of a chunk whose worker died; it runs
        # alone on an idle worker, so that a death names the episode that caused it
        queue: deque[tuple[list[EpisodeSpec], bool]] = deque(
            (list(specs[i : i + size]), False) for i in range(0, len(specs), size)
        )
        bar = _Progress(len(specs)) if progress else None
        pending: dict[Any, tuple[int, list[EpisodeSpec], bool]] = {}  # ref → actor, chunk
        counts = [0] * len(self.actors)
        sent_to: dict[Any, Any] = {}  # ref → the actor handle it went to

        def fill() -> None:  # round-robin, two chunks per worker; a suspect only on an idle one
            placed = True
            while queue and placed:
                placed = False
                for index, actor in enumerate(list(self.actors)):
                    mine = [suspect for i, _, suspect in pending.values() if i == index]
                    if not queue or len(mine) >= 2 or any(mine) or (queue[0][1] and mine):
                        continue
                    chunk_specs, suspect = queue.popleft()
                    ref = actor.run.remote(chunk_specs)
                    pending[ref], sent_to[ref] = (index, chunk_specs, suspect), actor
                    placed = True

        try:
            fill()
            while pending:
                ready, _ = self.ray.wait(list(pending), num_returns=1)
                index, chunk_specs, suspect = pending.pop(ready[0])
                try:
                    records = self.ray.get(ready[0])
                except self.ray.exceptions.RayActorError as e:
                    if getattr(e, "actor_init_failed", False):
                        raise DistributedError(f"a Ray worker failed: {_cause(e)}") from e
                    if sent_to[ready[0]] is self.actors[index]:  # the first news of its death
                        self.ray.kill(self.actors[index])
                        self.actors[index] = self._new_actor()
                    if suspect:  # it ran alone: it killed its worker
                        records = [_died(self.agent_name, chunk_specs[0], e)]
                    else:  # this chunk, or one before it on that worker, killed it
                        queue.extendleft(([s], True) for s in reversed(chunk_specs))
                        records = []
                except self.ray.exceptions.RayError as e:
                    raise DistributedError(f"a Ray worker failed: {_cause(e)}") from e
                sent_to.pop(ready[0], None)
                for record in records:
                    on_record(record)
                    counts[index] += 1
                    if bar is not None:
                        bar.update(record)
                fill()
        finally:
            for ref in pending:
                self.ray.cancel(ref, force=False)
            if bar is not None:
                bar.close()
        return counts

    def usage(self) -> dict[str, Usage]:
        """The model calls of the live workers, per role, summed (a dead worker's are lost)."""
        total: dict[str, Usage] = {}
        for counts in self._get([a.usage.remote() for a in self.actors]):
            add_usage(total, counts)
        return dict(sorted(total.items()))

    def close(self) -> None:
        """Close every worker's backends, end the actors, and stop a Ray started here."""
        try:
            if getattr(self, "actors", None):
                self.ray.wait([a.close.remote() for a in self.actors],
                              num_returns=len(self.actors), timeout=30)
                for actor in self.actors:
                    self.ray.kill(actor)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast when a ``HOST:PORT`` (or ``ray://HOST:PORT``) address takes no connection.

    Ray itself retries an unreachable head node for minutes, printing only its own warnings.
    ``auto`` (a cluster started on this machine) is left to Ray, which answers at once.
    """
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise DistributedError(
            f"cannot reach the Ray cluster at {address!r} ({e}); start one with `ray start "
            "--head` and pass the address it prints, or give --ray alone for a local instance"
        ) from None


def _died(agent: str, spec: EpisodeSpec, error: BaseException) -> EpisodeRecord:
    """The record of an episode whose worker process died running it (alone)."""
    return EpisodeRecord(
        spec.env_id, spec.task_id, dict(spec.env_kwargs), spec.seed, agent, "env-error",
        reason=f"the Ray worker died running this episode: {_cause(error)}",
    )


def _cause(error: BaseException) -> str:
    """The worker's own exception a Ray error wraps, as ``Type: message`` on one line.

    A failed task carries it as ``cause``; a failed actor constructor only as the last line
    of the traceback text in its message.
    """
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(error).splitlines()]
    lines = [line for line in lines if line and not set(line) <= {"^", "~"}]
    return lines[-1] if lines else type(error).__name__
