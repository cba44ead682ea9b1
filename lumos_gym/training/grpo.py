"""GRPO over whole multi-turn episodes: Lumos-I's modules learn from the envs' rewards.

The planner and grounder (or the integrated agent's policy) are trained. Each step (:func:`grpo`):

1. **rollouts**: ``tasks_per_step`` tasks are drawn (seeded by the step) from the train envs,
   and each is played ``group_size`` times by the agent through the batched
   :class:`~lumos_gym.agents.runner.Runner` at ``temperature``, on one
   :class:`~lumos_gym.models.hf.HFBackend` whose LoRA adapters (one per role) are the very
   weights being trained; the runner records every module call's tokens
   (:mod:`lumos_gym.agents.tokens`);
2. **advantages**: an episode's reward is the env's (minus ``invalid_penalty`` per invalid
   action), and its advantage is its reward minus its group's mean, divided by the group's
   standard deviation (``scale_rewards``); a group whose episodes all score alike teaches
   nothing and is dropped;
3. **update**: every module call of an episode is one sample (its prompt, its completion, the
   episode's advantage); the loss on its completion tokens is the policy gradient
   ``-exp(logp - sg(logp)) * A`` plus ``beta`` times the k3 estimate of the KL divergence to
   the reference adapter (the starting adapter of the role, loaded beside it), averaged over
   every completion token of the step; one AdamW step per rollout batch (so the sampling
   policy is the trained one: on-policy, the ratio is 1 and only its gradient counts);
4. every ``save_steps`` steps, ``OUT/checkpoint-STEP/`` holds each role's adapter, the optimizer
   and the step; ``resume`` continues from the last one. The final adapters go to
   ``OUT/<role>/`` (``evaluate --planner OUT/planner --grounder OUT/grounder``) and the report
   (rewards per step, KL, tokens sampled, time, device, envs, reward) to ``OUT/lumos_grpo.json``.

Why not TRL's ``GRPOTrainer``: it trains one model on one completion per prompt (a rollout
function may return one token sequence per generation, with the env's tokens masked). A
Lumos-I episode is many separate module calls of two adapters whose prompts are re-rendered
each round, all sharing the episode's reward; and rollouts must go through the project's
runner and backend (batched asks, the prefix cache). This loop is small and uses those pieces.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lumos_gym import __version__
from lumos_gym.agents import make_agent
from lumos_gym.agents.base import AgentConfig
from lumos_gym.agents.runner import EpisodeRecord, EpisodeSpec, Runner
from lumos_gym.agents.tokens import expand_calls
from lumos_gym.jsonl import write_json_atomic
from lumos_gym.models.sources import adapter_base_name
from lumos_gym.training.config import TrainingError
from lumos_gym.training.trainer import device_name, name_adapter_base

logger = logging.getLogger(__name__)

REPORT_FILE = "lumos_grpo.json"
"""The run report in the output folder."""

#: The roles each agent trains.
AGENT_ROLES = {"lumos-i": ("planner", "grounder"), "integrated": ("policy",)}


@dataclass
class GRPOConfig:
    """One GRPO run (see the module docstring).

    Attributes:
        adapters: role → the LoRA adapter folder it starts from (also its KL reference).
        envs: the train envs, each ``(env id, constructor arguments)``.
        out: the output folder.
        agent: ``lumos-i`` or ``integrated``.
        recipe: the recipe the defaults came from (recorded).
        steps: rollout-and-update steps.
        tasks_per_step: tasks drawn per step.
        group_size: episodes per task (the group its advantages are relative to).
        temperature: the sampling temperature (1.0 samples the policy the loss trains).
        lr: AdamW's learning rate.
        beta: the weight of the KL term.
        scale_rewards: divide advantages by the group's standard deviation.
        invalid_penalty: subtracted from an episode's reward per invalid action.
        max_new_tokens: the budget of one module call.
        max_rounds: the agent's round limit (None: its per-task-type default).
        micro_batch: samples per forward pass of the update.
        max_grad_norm: the gradient clipping norm.
        limit: tasks per env (the first ones).
        save_steps: steps between checkpoints.
        seed: the seed of the task draws and of the sampling.
        device: ``auto``, ``cpu`` or ``cuda``.
        batch_size: episodes in flight (the most asks one generate call takes).
        resume: continue the run in ``out`` from its last checkpoint.
        progress: show a progress bar of the steps (on stderr) with the last mean reward.
    """

    adapters: dict[str, str]
    envs: list[tuple[str, dict[str, Any]]]
    out: str = "runs/grpo"
    agent: str = "lumos-i"
    recipe: str | None = None
    steps: int = 50
    tasks_per_step: int = 4
    group_size: int = 4
    temperature: float = 1.0
    lr: float = 1e-5
    beta: float = 0.04
    scale_rewards: bool = True
    invalid_penalty: float = 0.0
    max_new_tokens: int = 128
    max_rounds: int | None = None
    micro_batch: int = 2
    max_grad_norm: float = 1.0
    limit: int | None = None
    save_steps: int = 10
    seed: int = 0
    device: str = "auto"
    batch_size: int = 16
    resume: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        self.envs = [(str(e), dict(k)) for e, k in self.envs]
        problems = []
        if self.agent not in AGENT_ROLES:
            problems.append(f"agent must be one of {', '.join(AGENT_ROLES)}, got {self.agent!r}")
        elif sorted(self.adapters) != sorted(AGENT_ROLES[self.agent]):
            problems.append(f"{self.agent} trains {', '.join(AGENT_ROLES[self.agent])}: give an "
                            f"adapter for each, got {sorted(self.adapters)}")
        if not self.envs:
            problems.append("no train env given")
        for name in ("steps", "tasks_per_step", "micro_batch", "save_steps", "batch_size"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1")
        if self.group_size < 2:
            problems.append("group_size must be at least 2 (advantages are relative to a group)")
        if self.temperature <= 0 or self.lr <= 0 or self.beta < 0:
            problems.append("temperature and lr must be positive and beta not negative")
        if problems:
            raise TrainingError("bad GRPO config: " + "; ".join(problems))


#: GRPO recipes: defaults for two CPU cores and for one GPU.
GRPO_RECIPES: dict[str, dict[str, Any]] = {
    "cpu-small": {"steps": 20, "tasks_per_step": 2, "group_size": 4, "micro_batch": 1,
                  "batch_size": 8, "max_new_tokens": 64, "lr": 1e-5, "save_steps": 5},
    "gpu-small": {"steps": 200, "tasks_per_step": 8, "group_size": 8, "micro_batch": 8,
                  "batch_size": 64, "max_new_tokens": 128, "lr": 5e-6, "save_steps": 25},
}


def grpo_config(recipe: str | None, **settings: Any) -> GRPOConfig:
    """A config from a GRPO recipe's defaults and ``settings`` (``None`` values ignored).

    Raises:
        TrainingError: an unknown recipe or a bad value.
    """
    if recipe is not None and recipe not in GRPO_RECIPES:
        raise TrainingError(f"unknown GRPO recipe {recipe!r}; known: {', '.join(GRPO_RECIPES)}")
    values = {**GRPO_RECIPES.get(recipe or "", {}),
              **{k: v for k, v in settings.items() if v is not None}}
    return GRPOConfig(recipe=recipe, **values)


# ----------------------------------------------------------------------- pure pieces
def group_advantages(rewards: Sequence[float], *, scale: bool = True) -> list[float]:
    """Each reward minus the group's mean (divided by its standard deviation with ``scale``)."""
    if all(r == rewards[0] for r in rewards):
        return [0.0] * len(rewards)
    mean = statistics.fmean(rewards)
    spread = statistics.pstdev(rewards) + 1e-4 if scale else 1.0
    return [(r - mean) / spread for r in rewards]


def episode_reward(record: EpisodeRecord, invalid_penalty: float = 0.0) -> float:
    """The reward GRPO sees: the env's, minus ``invalid_penalty`` per invalid action."""
    return float(record.reward) - invalid_penalty * record.invalid_actions


def grpo_token_loss(logp: Any, ref_logp: Any, advantages: Any, mask: Any, beta: float) -> Any:
    """The per-token GRPO loss: policy gradient plus ``beta`` times the k3 KL estimate.

    Args:
        logp: the trained policy's log-probabilities of the sampled tokens, ``(rows, tokens)``.
        ref_logp: the reference's, same shape (no gradient).
        advantages: one per row.
        mask: 1 where a token is trained.
        beta: the KL weight.

    Returns:
        ``(loss per token, kl per token)``, both masked.
    """
    import torch

    ratio = torch.exp(logp - logp.detach())
    delta = ref_logp - logp
    kl = torch.exp(delta) - delta - 1
    loss = -ratio * advantages[:, None] + beta * kl
    return loss * mask, kl.detach() * mask


@dataclass
class Sample:
    """One module call to learn from: its role, tokens and the episode's advantage."""

    role: str
    prompt_ids: list[int]
    completion_ids: list[int]
    mask: list[int]
    advantage: float


def samples_of(
    records: Sequence[EpisodeRecord], *, scale: bool, invalid_penalty: float
) -> tuple[list[Sample], list[float]]:
    """The samples of a step's episodes (groups by task), and every episode's reward."""
    groups: dict[tuple[str, str], list[EpisodeRecord]] = {}
    for record in records:
        groups.setdefault((record.env_id, record.task_id), []).append(record)
    samples, rewards = [], []
    for group in groups.values():
        scores = [episode_reward(r, invalid_penalty) for r in group]
        rewards += scores
        for record, advantage in zip(group, group_advantages(scores, scale=scale), strict=True):
            if advantage == 0:
                continue
            for call in expand_calls(record.tokens or []):
                mask = call.get("loss_mask") or [1] * len(call["completion_ids"])
                if call["completion_ids"]:
                    samples.append(Sample(call["role"], call["prompt_ids"],
                                          call["completion_ids"], mask, advantage))
    return samples, rewards


# --------------------------------------------------------------------------- the policy
def _torch_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


class Policy:
    """The trained adapters (one per role) and their references, on one hf backend."""

    def __init__(self, config: GRPOConfig, start: Mapping[str, str]) -> None:
        from lumos_gym.models.hf import HFBackend  # heavy: torch and transformers

        roles = AGENT_ROLES[config.agent]
        base = adapter_base_name(config.adapters[roles[0]])
        if base is None:
            raise TrainingError(f"the adapter {config.adapters[roles[0]]} names no base model")
        self.base = base
        named = {role: start[role] for role in roles}
        named.update({f"ref-{role}": config.adapters[role] for role in roles})
        self.backend = HFBackend(base, adapters=named, device=_torch_device(config.device),
                                 dtype="float32", batch_size=config.batch_size)
        self.model = self.backend._shared.model
        self.roles = roles
        self.params = {role: self._trainable(role) for role in roles}

    def _trainable(self, role: str) -> list[Any]:
        found = [p for n, p in self.model.named_parameters() if f".{role}." in n and "lora_" in n]
        for p in found:
            p.requires_grad_(True)
        if not found:
            raise TrainingError(f"the adapter of {role} has no LoRA weights to train")
        return found

    def backends(self) -> dict[str, Any]:
        """The backend of each role: the shared weights with that role's adapter active."""
        return {role: self.backend.with_adapter(role) for role in self.roles}

    def token_logprobs(self, adapter: str, batch: Sequence[Sample]) -> tuple[Any, Any]:
        """Log-probabilities of each sample's completion tokens under ``adapter``, and a mask.

        Rows are left-padded so the completions end together; only the last positions'
        logits are computed.
        """
        import torch

        self.model.set_adapter(adapter)
        device = self.backend._shared.device
        rows = [s.prompt_ids + s.completion_ids for s in batch]
        width = max(map(len, rows))
        keep = max(len(s.completion_ids) for s in batch)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), keep))
        for i, (row, sample) in enumerate(zip(rows, batch, strict=True)):
            ids[i, width - len(row):] = torch.tensor(row)
            attention[i, width - len(row):] = 1
            n = len(sample.completion_ids)
            mask[i, keep - n:] = torch.tensor(sample.mask, dtype=torch.float)
        positions = (attention.cumsum(1) - 1).clamp(min=0)
        logits = self.model(input_ids=ids.to(device), attention_mask=attention.to(device),
                            position_ids=positions.to(device), use_cache=False,
                            logits_to_keep=keep + 1).logits[:, :-1].float()
        targets = ids[:, width - keep:].to(device)
        logp = torch.log_softmax(logits, -1).gather(2, targets[..., None])[..., 0]
        return logp, mask.to(device)

    def close(self) -> None:
        """Free the weights."""
        self.backend.close()


# ----------------------------------------------------------------------------- the loop
def task_ids(envs: Sequence[tuple[str, Mapping[str, Any]]], limit: int | None) -> list[tuple]:
    """Every ``(env id, arguments, task id)`` the run draws from."""
    import gymnasium as gym

    found = []
    for env_id, kwargs in envs:
        env = gym.make(env_id, **dict(kwargs))
        try:
            ids = [task.id for task in env.unwrapped.tasks][:limit]
        finally:
            env.close()
        found += [(env_id, dict(kwargs), task_id) for task_id in ids]
    if not found:
        raise TrainingError("the train envs hold no task")
    return found


def rollouts(config: GRPOConfig, policy: Policy, tasks: Sequence[tuple], step: int) -> list:
    """Play ``group_size`` episodes of each of the step's tasks; return their records."""
    rng = random.Random(config.seed * 100_003 + step)
    chosen = rng.sample(list(tasks), min(config.tasks_per_step, len(tasks)))
    specs = [EpisodeSpec(env_id, task_id, kwargs, seed=config.seed + step * 1000 + j)
             for env_id, kwargs, task_id in chosen for j in range(config.group_size)]
    agent = make_agent(config.agent, AgentConfig(
        max_rounds=config.max_rounds, max_new_tokens=config.max_new_tokens,
        temperature=config.temperature, seed=config.seed * 100_003 + step))
    runner = Runner(agent, policy.backends(), max_in_flight=config.batch_size,
                    record_tokens=True)
    return runner.run(specs)


def update(config: GRPOConfig, policy: Policy, optimizer: Any, samples: Sequence[Sample]) -> dict:
    """One optimizer step on ``samples``; return the mean loss and KL per token."""
    import torch

    tokens = sum(sum(s.mask) for s in samples)
    if not tokens:
        return {"loss": 0.0, "kl": 0.0, "tokens": 0}
    total_loss = total_kl = 0.0
    for role in policy.roles:
        mine = sorted((s for s in samples if s.role == role), key=lambda s: len(s.prompt_ids))
        for start in range(0, len(mine), config.micro_batch):
            batch = mine[start:start + config.micro_batch]
            with torch.no_grad():
                ref, _ = policy.token_logprobs(f"ref-{role}", batch)
            logp, mask = policy.token_logprobs(role, batch)
            for p in policy.params[role]:
                p.requires_grad_(True)  # set_adapter may have frozen them
            advantages = torch.tensor([s.advantage for s in batch], device=logp.device)
            loss, kl = grpo_token_loss(logp, ref, advantages, mask, config.beta)
            (loss.sum() / tokens).backward()
            total_loss += loss.sum().item()
            total_kl += kl.sum().item()
    params = [p for role in policy.roles for p in policy.params[role]]
    torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if policy.backend.prefix_cache is not None:
        policy.backend.prefix_cache.clear()  # its states were computed by the old weights
    return {"loss": total_loss / tokens, "kl": total_kl / tokens, "tokens": tokens}


def save_adapters(policy: Policy, folder: Path) -> None:
    """Write each role's adapter to ``folder/<role>/`` (its base named as the run's)."""
    for role in policy.roles:
        staging = folder / f".{role}-staging"
        policy.model.save_pretrained(str(staging), selected_adapters=[role])
        saved = staging / role if (staging / role).is_dir() else staging
        target = folder / role
        if target.exists():
            shutil.rmtree(target)
        saved.rename(target)
        shutil.rmtree(staging, ignore_errors=True)
        name_adapter_base(target, policy.base)
        config = json.loads((target / "adapter_config.json").read_text("utf-8"))
        config["inference_mode"] = True
        write_json_atomic(target / "adapter_config.json", config)


def _checkpoint(policy: Policy, optimizer: Any, out: Path, step: int, history: list) -> None:
    import torch

    folder = out / f"checkpoint-{step}"
    save_adapters(policy, folder)
    torch.save(optimizer.state_dict(), folder / "optimizer.pt")
    write_json_atomic(folder / "state.json", {"step": step, "history": history})


def _last_checkpoint(out: Path) -> Path | None:
    found = sorted(out.glob("checkpoint-*/state.json"),
                   key=lambda p: int(p.parent.name.split("-")[1]))
    return found[-1].parent if found else None


def _start(config: GRPOConfig) -> tuple[dict[str, str], int, list, Path | None]:
    """The adapters to start from, the first step, the history so far, the checkpoint."""
    out = Path(config.out)
    last = _last_checkpoint(out) if out.is_dir() else None
    if not config.resume:
        if last is not None or (out / REPORT_FILE).exists():
            raise TrainingError(f"{out} already holds a GRPO run; pass --resume to continue it, "
                                "or choose another --out")
        return dict(config.adapters), 0, [], None
    if last is None:
        return dict(config.adapters), 0, [], None
    saved = json.loads((out / "grpo_config.json").read_text("utf-8"))
    changed = [k for k in ("agent", "adapters", "envs", "group_size", "tasks_per_step", "seed")
               if json.loads(json.dumps(asdict(config)[k])) != saved.get(k)]
    if changed:
        raise TrainingError(f"--resume: the run in {out} was made with other {', '.join(changed)}")
    state = json.loads((last / "state.json").read_text("utf-8"))
    start = {role: str(last / role) for role in config.adapters}
    return start, int(state["step"]), list(state["history"]), last


def grpo(config: GRPOConfig) -> dict[str, Any]:
    """Run GRPO as ``config`` says (see the module docstring); return the report."""
    import torch
    from tqdm import tqdm

    out = Path(config.out)
    start, first, history, checkpoint = _start(config)
    tasks = task_ids(config.envs, config.limit)
    torch.manual_seed(config.seed + first)
    policy = Policy(config, start)
    bar = tqdm(total=config.steps, initial=first, desc="GRPO", unit="step",
               disable=not config.progress)
    try:
        params = [p for role in policy.roles for p in policy.params[role]]
        optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
        if checkpoint is not None:
            optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt"))
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "grpo_config.json", asdict(config))
        started = time.perf_counter()
        for step in range(first + 1, config.steps + 1):
            tick = time.perf_counter()
            records = rollouts(config, policy, tasks, step)
            samples, rewards = samples_of(records, scale=config.scale_rewards,
                                          invalid_penalty=config.invalid_penalty)
            stats = update(config, policy, optimizer, samples)
            history.append({
                "step": step, "reward_mean": statistics.fmean(rewards), "episodes": len(records),
                "samples": len(samples), "sampled_tokens": sum(r.output_tokens for r in records),
                **stats, "seconds": round(time.perf_counter() - tick, 2),
                "device": _device_name(policy)})
            logger.info("GRPO step %d: %s", step, history[-1])
            bar.set_postfix(reward=f"{history[-1]['reward_mean']:.3f}")
            bar.update()
            if step % config.save_steps == 0 or step == config.steps:
                _checkpoint(policy, optimizer, out, step, history)
        save_adapters(policy, out)
        report = _report(config, policy, history, time.perf_counter() - started, first)
        write_json_atomic(out / REPORT_FILE, report)
        return report
    finally:
        bar.close()
        policy.close()


def checkpoint_report(folder: str | Path) -> dict[str, Any] | None:
    """The report of a run's checkpoint (``OUT/checkpoint-N``), as the run's end would write it.

    Read from the checkpoint's ``state.json`` (the steps so far) and the run's
    ``grpo_config.json``, so adapters scored from a checkpoint of a run that was cut have a
    card too; the device is the one its steps record (``None`` for a run whose steps predate
    that). ``None`` when either file is missing or unreadable.
    """
    folder = Path(folder)
    try:
        state = json.loads((folder / "state.json").read_text("utf-8"))
        config = json.loads((folder.parent / "grpo_config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    history = list(state.get("history") or [])
    return {
        "method": "grpo", "config": config, "base_model": adapter_base_name(
            folder / next(iter(config.get("adapters") or {"policy": ""}))),
        "envs": config.get("envs") or [], "reward": _reward_text(config.get("invalid_penalty")),
        "steps": state.get("step"), "history": history, **_history_totals(history),
        "device": _history_device(history), "checkpoint": folder.name,
    }


def _device_name(policy: Policy) -> str:
    """Where ``policy`` runs: ``cpu``, or the CUDA card's name."""
    return device_name(policy.backend._shared.device)


def _history_device(history: Sequence[Mapping[str, Any]]) -> str | None:
    """The devices a run's steps ran on (a resumed run may have moved), or ``None``."""
    devices = list(dict.fromkeys(str(h["device"]) for h in history if h.get("device")))
    return " then ".join(devices) or None


def _reward_text(invalid_penalty: float | None) -> str:
    """What a run's reward was, as its report says it."""
    penalty = f" - {invalid_penalty} x invalid actions" if invalid_penalty else ""
    return "env reward" + penalty


def _history_totals(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first and last mean rewards, generated tokens and seconds of a run's steps.

    The seconds are every step's, over the sessions of a resumed run.
    """
    return {
        "first_reward": history[0]["reward_mean"] if history else None,
        "final_reward": history[-1]["reward_mean"] if history else None,
        "sampled_tokens": sum(int(h.get("sampled_tokens") or 0) for h in history),
        "seconds": round(sum(float(h.get("seconds") or 0) for h in history), 1),
    }


def _report(config: GRPOConfig, policy: Policy, history: list, seconds: float,
            first: int) -> dict[str, Any]:
    device = _device_name(policy)
    return {
        "lumos_gym_version": __version__, "method": "grpo", "config": asdict(config),
        "base_model": policy.base, "envs": [[e, k] for e, k in config.envs],
        "reward": _reward_text(config.invalid_penalty),
        "steps": config.steps, "resumed_from_step": first or None, "history": history,
        **_history_totals(history),
        "session_seconds": round(seconds, 1), "device": device,  # this process's apart
        "adapters": {role: str(Path(config.out) / role) for role in policy.roles},
    }


__all__ = [
    "AGENT_ROLES",
    "GRPOConfig",
    "GRPO_RECIPES",
    "REPORT_FILE",
    "checkpoint_report",
    "Sample",
    "episode_reward",
    "group_advantages",
    "grpo",
    "grpo_config",
    "grpo_token_loss",
    "samples_of",
    "save_adapters",
]
