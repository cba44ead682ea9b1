"""GRPO with TRL, rewarded by a lumos env served over OpenEnv (``lumos-gym serve-env``).

Start the env server first, then point this script at it::

    lumos-gym serve-env lumos/MathWord-v0 --port 8000
    python examples/trl_grpo_openenv.py --url http://127.0.0.1:8000 --max-steps 100

Each training prompt is one of the served env's tasks (read from the server with ``reset``).
The model answers with the whole grounded program on one line, e.g.
``R1 = Calculator(36*3/4); Answer(R1)``; that text is sent as a single ``step`` to a session of
the served env, reset on the same task, and the step's reward (1.0 for a correct ``Answer``,
else 0.0) is the GRPO reward.

The rollout goes through ``GRPOTrainer(rollout_func=...)`` (TRL 1.16, experimental there): the
function generates the completions itself, with the policy's ``generate`` (CPU or one GPU) or,
with ``--use-vllm``, with the vLLM engine TRL sets up, and returns the env's rewards as an extra
field that the reward function passes on. The script starts nothing but the trainer.
TRL is not a lumos-gym dependency: ``pip install trl`` (tested with trl 1.16.0).
"""

from __future__ import annotations

import argparse
import os
import time

INSTRUCTION = (
    "Solve the math problem with tools. Write every action on one line, separated by '; '. "
    "Bind each result to R1, R2, ... and finish with Answer(Rn).\n"
    "Tools: {tools}\n"
    "Example: R1 = Calculator(36*3/4); Answer(R1)\n\n"
    "Problem: {question}"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: the served env, the model and a few GRPO settings."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="base URL of a running `lumos-gym serve-env`")
    p.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct",
                   help="a causal LM: Hub id or local folder")
    p.add_argument("--max-steps", type=int, default=100, help="GRPO optimizer steps")
    p.add_argument("--num-tasks", type=int, default=256,
                   help="tasks read from the server (reset with seeds 0..N-1) as prompts")
    p.add_argument("--batch-size", type=int, default=8,
                   help="completions per step (a multiple of --num-generations)")
    p.add_argument("--num-generations", type=int, default=8, help="completions per prompt")
    p.add_argument("--max-completion-length", type=int, default=96, help="tokens per completion")
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--output-dir", default="grpo-lumos-openenv")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--use-vllm", action="store_true",
                   help="generate with vLLM (needs a GPU and the vllm package)")
    p.add_argument("--vllm-mode", choices=["colocate", "server"], default="colocate",
                   help="with --use-vllm: vLLM inside the trainer, or `trl vllm-serve`")
    return p.parse_args(argv)


def load_tasks(url: str, count: int) -> dict[str, str]:
    """Prompts for ``count`` of the served env's tasks: ``{prompt text: task id}``."""
    from openenv.core import GenericEnvClient

    tasks = {}
    with GenericEnvClient(base_url=url).sync() as env:
        for seed in range(count):
            observation = env.reset(seed=seed).observation
            info = observation["info"]
            tools = "; ".join(str(a) for a in info["actions"])
            prompt = INSTRUCTION.format(tools=tools, question=observation["text"])
            tasks.setdefault(prompt, info["task_id"])
    return tasks


class ServedEnvRollout:
    """A ``rollout_func`` for ``GRPOTrainer``: generate, then play each completion in the env.

    TRL hands it the prompts of one generation batch (each prompt repeated once per
    generation) and the trainer; it returns token ids, the sampling log-probabilities (vLLM
    only: ``None`` from ``generate``) and, as the extra field ``env_reward``, the reward that
    the served env's ``step`` gave each completion.
    """

    def __init__(self, url: str, tasks: dict[str, str]):
        self.url = url
        self.tasks = tasks
        self.calls = 0
        self.rewards: list[list[float]] = []

    def __call__(self, prompts: list, trainer) -> dict:
        """One generation batch: the completions' token ids and the env's reward for each."""
        tokenizer = trainer.processing_class
        texts = [_user_text(p) for p in prompts]
        prompt_ids = [_chat_ids(tokenizer, text) for text in texts]
        started = time.perf_counter()
        if trainer.use_vllm:
            completion_ids, logprobs = _generate_vllm(trainer, prompt_ids)
        else:
            completion_ids, logprobs = _generate_hf(trainer, prompt_ids)
        generated = time.perf_counter()
        actions = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        rewards = self.play([self.tasks[t] for t in texts], [a.strip() for a in actions])
        self.calls += 1
        self.rewards.append(rewards)
        print(f"rollout {self.calls}: {len(prompts)} completions, generated in "
              f"{generated - started:.1f} s, played on {self.url} in "
              f"{time.perf_counter() - generated:.1f} s; env rewards {rewards}; first action "
              f"{actions[0].strip()[:60]!r}", flush=True)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids,
                "logprobs": logprobs, "env_reward": rewards}

    def play(self, task_ids: list[str], actions: list[str]) -> list[float]:
        """Each action in a session of the served env reset on its task: the step's rewards."""
        from openenv.core import GenericEnvClient

        rewards = []
        with GenericEnvClient(base_url=self.url).sync() as env:
            for task_id, action in zip(task_ids, actions, strict=True):
                env.reset(options={"task_id": task_id})
                result = env.step({"text": action})
                rewards.append(float(result.reward or 0.0))
        return rewards


def _user_text(prompt) -> str:
    """The user message of a conversational prompt (or the prompt itself)."""
    return prompt[-1]["content"] if isinstance(prompt, list) else prompt


def _chat_ids(tokenizer, text: str) -> list[int]:
    """Token ids of one user turn and the assistant header, with the model's chat template."""
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                             tokenize=False, add_generation_prompt=True)
    return tokenizer(rendered, add_special_tokens=False)["input_ids"]


def _generate_hf(trainer, prompt_ids: list[list[int]]) -> tuple[list[list[int]], None]:
    """Sample one completion per prompt with the policy's ``generate``; no log-probabilities."""
    import torch
    from transformers import GenerationConfig

    args, tokenizer = trainer.args, trainer.processing_class
    model = trainer.accelerator.unwrap_model(trainer.model)
    stops = {tokenizer.eos_token_id}
    model_eos = model.generation_config.eos_token_id
    stops.update(model_eos if isinstance(model_eos, list) else [model_eos])
    stops.discard(None)
    width = max(len(ids) for ids in prompt_ids)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in prompt_ids])
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompt_ids])
    config = GenerationConfig(do_sample=True, temperature=args.temperature, top_p=args.top_p,
                              top_k=args.top_k or None, max_new_tokens=args.max_completion_length,
                              pad_token_id=pad, eos_token_id=sorted(stops))
    device = trainer.accelerator.device
    training = model.training
    model.eval()
    with torch.no_grad():
        output = model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                generation_config=config)
    model.train(training)
    completions = []
    for row in output[:, width:].tolist():
        end = next((i + 1 for i, token in enumerate(row) if token in stops), len(row))
        completions.append(row[:end])
    return completions, None


def _generate_vllm(trainer, prompt_ids: list[list[int]]) -> tuple[list, list]:
    """Sample with the vLLM engine TRL built for ``use_vllm`` (weights synced by the trainer)."""
    _, completion_ids, logprobs, _ = trainer.vllm_generation.generate(
        prompts=prompt_ids, images=None, num_generations=trainer.num_generations)
    return completion_ids, [[top[0] for top in token] for token in logprobs]


def env_reward(completions, env_reward, **kwargs) -> list[float]:
    """The reward function: what the served env's ``step`` returned for each completion."""
    return [float(r) for r in env_reward]


def main(argv: list[str] | None = None) -> int:
    """Read tasks from the server, then train with GRPO on the env's rewards."""
    args = parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tasks = load_tasks(args.url, args.num_tasks)
    print(f"{len(tasks)} tasks from {args.url}", flush=True)
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": t}] for t in tasks]})
    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    config = GRPOConfig(
        output_dir=args.output_dir, max_steps=args.max_steps, seed=args.seed,
        per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, learning_rate=args.learning_rate,
        use_vllm=args.use_vllm, vllm_mode=args.vllm_mode,
        bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
        logging_steps=1, report_to="none", save_strategy="no",
    )
    rollout = ServedEnvRollout(args.url, tasks)
    trainer = GRPOTrainer(model=args.model, processing_class=tokenizer, reward_funcs=env_reward,
                          args=config, train_dataset=dataset, rollout_func=rollout)
    started = time.perf_counter()
    trainer.train()
    print(f"trained {trainer.state.global_step} step(s) in {time.perf_counter() - started:.1f} s;"
          f" env rewards per rollout: {rollout.rewards}", flush=True)
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"step {entry['step']}: mean reward {entry['reward']:.3f}, "
                  f"loss {entry.get('loss', float('nan')):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
