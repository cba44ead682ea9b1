"""Run the episodes of an evaluation on a Ray cluster (``lumos-gym evaluate --ray [ADDRESS]``).

The driver (the ``lumos-gym evaluate`` process) stays the only writer of ``episodes.jsonl``:
it plans the episodes, starts ``workers`` Ray actors, and hands each actor chunks of
episodes (``chunk`` at a time, two chunks queued per actor so none waits between them).
Every actor builds its own envs, agent and model backends once and runs its chunks with the
ordinary batched :class:`~lumos_gym.agents.runner.Runner`; the records come back to the
driver, which appends them one by one as each chunk finishes. A killed driver therefore
loses at most the chunks in flight, and ``--resume`` runs exactly the episodes not written.

A worker lost with its node (the node's raylet killed, the machine gone) loses only the
chunks it held: they are sent again, whole, to the workers left, and a replacement worker is
asked of Ray but used only once it has started somewhere, so that a cluster with no room left
goes on with the workers it has. ``run.json``'s ``ray`` then says how many episodes each node
ran and which chunks were sent again (:meth:`RayPool.report`).

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
import re
import socket
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lumos_gym.agents.base import FILE_MODULE_PREFIX, Agent
from lumos_gym.agents.runner import EpisodeRecord, EpisodeSpec, Runner, _Progress
from lumos_gym.envs import load_plugins
from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.backends import agent_backends
from lumos_gym.evaluation.identity import fingerprint
from lumos_gym.evaluation.provenance import provenance
from lumos_gym.evaluation.results import episode_key
from lumos_gym.evaluation.usage import (
    add_usage,
    counted_backends,
    open_cache,
    role_usage,
    usage_counts,
)
from lumos_gym.models.base import Backend
from lumos_gym.models.caching import Usage

#: How long a run whose every worker was lost waits for a replacement to start (a node to join
#: or to free a CPU) before it stops; while any worker is left, replacements never hold it up.
START_TIMEOUT_S = 300.0


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
        """The id of the Ray node this worker runs on (several nodes may share a machine)."""
        import ray  # the worker runs inside Ray: importing it here keeps the module Ray-free

        return ray.get_runtime_context().get_node_id()

    def close(self) -> None:
        """Close the backends."""
        self.built.close()


@dataclass(eq=False)
class _Worker:
    """One actor of a :class:`RayPool`, and the Ray node it runs on."""

    handle: Any
    node_ref: Any
    """The reference of its first call, ``node``."""
    starting: bool = False
    """A replacement until ``node`` answers: no chunk goes to it before, so that one Ray
    cannot place (no room left) holds nothing up. The workers of the pool's start take chunks
    at once (Ray queues them while the actor starts): the pool checked there was room."""
    node: str | None = None


@dataclass(frozen=True)
class _Chunk:
    """Episodes sent to one worker in one call."""

    specs: list[EpisodeSpec]
    suspect: bool = False
    """One episode of a chunk whose worker process died: it runs alone on an idle worker,
    so that a death names the episode that caused it."""
    retried: bool = False
    """Sent again after its worker was lost with its node; lost a second time, it is split
    into suspects (an episode that kills its worker in a way Ray reports as a lost node cannot
    take worker after worker with it)."""


@dataclass
class _Record:
    """What a pool did on the cluster over its runs (:meth:`RayPool.report`)."""

    episodes: dict[str, int] = field(default_factory=dict)  # node id → episodes written
    retried: list[dict[str, Any]] = field(default_factory=list)  # chunks sent again
    lost_nodes: list[str] = field(default_factory=list)


#: Resources every node has, left out of ``report``'s list of what a node offers.
_BOOKKEEPING = frozenset({"memory", "object_store_memory"})


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
                raise DistributedError(
                    f"cannot reach the Ray cluster at {address!r}: {e}{_token_hint(e)}"
                ) from e
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
            self.workers = [self._start_worker(starting=False) for _ in range(workers)]
            self.record = _Record()
        except BaseException:
            self._shutdown()
            raise

    def _start_worker(self, starting: bool = True) -> _Worker:
        handle = self._new_actor()
        return _Worker(handle, handle.node.remote(), starting=starting)

    def _node_of(self, worker: _Worker, wait: bool) -> str | None:
        """The node ``worker`` runs on; None when it died before saying (and not ``wait``)."""
        if worker.node is None and (wait or self.ray.wait([worker.node_ref], timeout=0)[0]):
            try:
                worker.node = self.ray.get(worker.node_ref)
            except self.ray.exceptions.RayError:
                if wait:
                    raise
        return worker.node

    def _started(self, worker: _Worker) -> None:
        """Take the answer of a replacement: it is ready, or it died before running any.

        Raises:
            DistributedError: its constructor raised (a model that cannot load, say): every
                worker would fail alike.
        """
        worker.starting = False
        try:
            self._node_of(worker, wait=True)
        except self.ray.exceptions.RayActorError as e:
            if getattr(e, "actor_init_failed", False):
                raise DistributedError(f"a Ray worker failed: {_cause(e)}") from e
            # placed on a node that then went away: not asked again, the run goes on without
            self.workers.remove(worker)
            self.ray.kill(worker.handle)
        except self.ray.exceptions.RayError as e:
            raise DistributedError(f"a Ray worker failed: {_cause(e)}") from e

    def _node_lost(self, node: str | None) -> bool:
        """Whether Ray holds ``node`` (a node id) for dead."""
        return node is not None and not any(
            n.get("NodeID") == node and n.get("Alive") for n in self.ray.nodes()
        )

    # ---------------------------------------------------------------------------- driver side
    def _get(self, refs: Any) -> Any:
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayError as e:
            raise DistributedError(f"a Ray worker failed: {_cause(e)}") from e

    def describe(self, argv: Sequence[str] | None) -> dict[str, Any]:
        """Worker 0's fingerprint and provenance, plus the cluster's layout."""
        described = self._get(self.workers[0].handle.describe.remote(argv))
        nodes = self._get([w.node_ref for w in self.workers])
        for worker, node in zip(self.workers, nodes, strict=True):
            worker.node = node
        described["provenance"]["ray"] = {
            "workers": len(self.workers), "nodes": len(set(nodes)),
            "resources": self.resources,
        }
        return described

    def report(self) -> dict[str, Any]:
        """What the runs did on the cluster, for ``run.json``'s ``ray``.

        Returns:
            ``episodes_per_node``: per node that ran episodes, its id, host, resources (CPU,
            GPU, custom ones), episodes written, and whether it was ``lost`` (a worker on it
            lost with its node: Ray's own verdict on a node comes seconds later);
            ``retried``: each chunk sent again after its worker was lost with its node (the
            node, the keys of its episodes in ``episodes.jsonl``); ``lost_nodes``: the ids of
            those nodes.
        """
        known = {n.get("NodeID"): n for n in self.ray.nodes()}
        per_node = []
        for node, episodes in self.record.episodes.items():
            info = known.get(node, {})
            resources = {k: v for k, v in (info.get("Resources") or {}).items()
                         if not k.startswith("node:") and k not in _BOOKKEEPING}
            per_node.append({"node": node, "host": info.get("NodeManagerAddress"),
                             "resources": resources, "episodes": episodes,
                             "lost": node in self.record.lost_nodes})
        return {"episodes_per_node": per_node, "retried": list(self.record.retried),
                "lost_nodes": list(self.record.lost_nodes)}

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
        out of memory), a new worker is started and its chunk is run again one episode at a
        time; an episode that kills its worker alone ends as ``env-error``, like any crashed
        episode. When a worker is lost with its node, its chunks are sent again whole to the
        workers left (:meth:`report` lists them), and the run goes on without waiting for its
        replacement, which takes chunks once Ray has found room for it.
        Returns how many episodes each worker ran (those of the run's start, then any started
        during it).

        Raises:
            DistributedError: a worker raised (a bug, not an episode's failure: the runner
                turns those into statuses), or every worker was lost and none could start
                again in :data:`START_TIMEOUT_S`; the records handed to ``on_record`` stay.
        """
        size = max(1, min(chunk, math.ceil(len(specs) / max(1, len(self.workers)))))
        queue: deque[_Chunk] = deque(
            _Chunk(list(specs[i : i + size])) for i in range(0, len(specs), size)
        )
        bar = _Progress(len(specs)) if progress else None
        pending: dict[Any, tuple[_Worker, _Chunk]] = {}  # ref → the worker, the chunk
        counts = {worker: 0 for worker in self.workers}

        try:
            self._fill(queue, pending)
            while queue or pending:
                starting = {w.node_ref: w for w in self.workers if w.starting}
                ready = self._next_ready(queue, pending, starting)
                if ready in starting:
                    self._started(starting[ready])
                    self._fill(queue, pending)
                    continue
                worker, task = pending.pop(ready)
                records = self._records(ready, worker, task, queue)
                counts[worker] = counts.get(worker, 0) + len(records)
                if records:  # it answered a later call: its node is known
                    node = self._node_of(worker, wait=True)
                    self.record.episodes[node] = self.record.episodes.get(node, 0) + len(records)
                for record in records:
                    on_record(record)
                    if bar is not None:
                        bar.update(record)
                counts.update({w: 0 for w in self.workers if w not in counts})
                self._fill(queue, pending)
        finally:
            for ref in pending:
                self.ray.cancel(ref, force=False)
            if bar is not None:
                bar.close()
        return list(counts.values())

    def _fill(self, queue: deque[_Chunk], pending: dict[Any, tuple[_Worker, _Chunk]]) -> None:
        """Send queued chunks round-robin, two a worker; a suspect chunk only to an idle one."""
        placed = True
        while queue and placed:
            placed = False
            for worker in list(self.workers):
                mine = [task.suspect for w, task in pending.values() if w is worker]
                if (not queue or worker.starting or len(mine) >= 2
                        or any(mine) or (queue[0].suspect and mine)):
                    continue
                task = queue.popleft()
                pending[worker.handle.run.remote(task.specs)] = (worker, task)
                placed = True

    def _next_ready(self, queue: deque[_Chunk], pending: dict[Any, tuple[_Worker, _Chunk]],
                    starting: dict[Any, _Worker]) -> Any:
        """Wait for the next chunk to finish or worker to start; return its reference.

        Raises:
            DistributedError: no chunk is running and no worker is starting, or none started
                in :data:`START_TIMEOUT_S`.
        """
        if not pending and not starting:
            raise DistributedError(
                "every Ray worker was lost and none can be started again; "
                f"{sum(len(t.specs) for t in queue)} episode(s) not run (--resume runs them)"
            )
        ready, _ = self.ray.wait([*pending, *starting], num_returns=1,
                                 timeout=None if pending else START_TIMEOUT_S)
        if not ready:
            raise DistributedError(
                f"every Ray worker was lost and no new one started in {START_TIMEOUT_S:g} s "
                "(the cluster has no room: add nodes, then --resume)"
            )
        return ready[0]

    def _records(self, ref: Any, worker: _Worker, task: _Chunk,
                 queue: deque[_Chunk]) -> list[EpisodeRecord]:
        """The records of a finished chunk.

        For a chunk whose worker died: none (the chunk is queued again, whole or one episode
        at a time), or, for a suspect, its ``env-error`` record.
        """
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as e:
            if getattr(e, "actor_init_failed", False):
                raise DistributedError(f"a Ray worker failed: {_cause(e)}") from e
            # a lost connection (not a death Ray saw) or a dead node: the node is gone, the
            # episodes not to blame; a process that died on a live node may have been killed
            # by one of them
            unavailable = getattr(ray.exceptions, "ActorUnavailableError", ())
            node = self._node_of(worker, wait=False)
            lost = isinstance(e, unavailable) or self._node_lost(node)
            if worker in self.workers:  # the first news of its death: a replacement is asked
                self.workers.remove(worker)
                ray.kill(worker.handle)
                self.workers.append(self._start_worker())
                if lost and node not in self.record.lost_nodes:
                    self.record.lost_nodes.append(node)
            if lost and not task.retried:
                queue.appendleft(replace(task, retried=True))
                self.record.retried.append({"node": node, "episodes": [
                    episode_key(s.env_id, s.env_kwargs, s.task_id, s.seed) for s in task.specs
                ]})
                return []
            if task.suspect:  # it ran alone: it killed its worker
                return [_died(self.agent_name, task.specs[0], e)]
            # this chunk, or one before it on that worker, killed it
            queue.extendleft(_Chunk([s], suspect=True) for s in reversed(task.specs))
            return []
        except ray.exceptions.RayError as e:
            raise DistributedError(f"a Ray worker failed: {_cause(e)}") from e

    def _ready(self) -> list[_Worker]:
        return [w for w in self.workers if not w.starting]

    def usage(self) -> dict[str, Usage]:
        """The model calls of the live workers, per role, summed (a dead worker's are lost)."""
        total: dict[str, Usage] = {}
        for counts in self._get([w.handle.usage.remote() for w in self._ready()]):
            add_usage(total, counts)
        return dict(sorted(total.items()))

    def close(self) -> None:
        """Close every worker's backends, end the actors, and stop a Ray started here."""
        try:
            workers = getattr(self, "workers", None) or []
            ready = [w for w in workers if not w.starting]
            if ready:  # one that never started has nothing to close, and would not answer
                self.ray.wait([w.handle.close.remote() for w in ready],
                              num_returns=len(ready), timeout=30)
            for worker in workers:
                self.ray.kill(worker.handle)
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


def _token_hint(error: BaseException) -> str:
    """How to give the cluster's token, when ``error`` (or one it wraps) says it was refused."""
    while error is not None:
        if type(error).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(error):
            return ("; the cluster asks for a token: set RAY_AUTH_MODE=token, and RAY_AUTH_TOKEN "
                    "(or ~/.ray/auth_token) to the head node's token")
        error = error.__cause__ or error.__context__
    return ""


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
