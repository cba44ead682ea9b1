"""``lumos-gym reproduce paper``: the Lumos paper's 7B training run, planned and checked first.

:func:`plan_paper` resolves the run without any GPU: the settings come from the
``lumos-paper`` recipe through :func:`~lumos_gym.training.config_from_recipe` (so they cannot
drift from what ``lumos-gym train`` runs), and the model, memory, steps and FLOPs from
:mod:`lumos_gym.training.paper`; :func:`render_dry_run` prints them, each with what it assumes.

Without ``--dry-run``, :func:`run_paper` prints the ``accelerate launch`` training commands and
the vLLM evaluation commands, refuses to start on fewer GPUs than asked, and otherwise runs them
one after another, skipping a module already trained and an evaluation already written.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import lumos_gym.training as training_package
from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.suites import get_suite
from lumos_gym.text import table
from lumos_gym.training import config_from_recipe
from lumos_gym.training.config import TrainConfig, TrainingError
from lumos_gym.training.paper import (
    GIB,
    GPU_MEMORY_GIB,
    GPU_TFLOPS,
    LLAMA2_7B,
    MFU,
    MODULES,
    PAPER_RECORDS,
    RECORD_SOURCES,
    BaseModel,
    MemoryRow,
    ModuleRun,
    data_by_module,
    default_data,
    load_base_model,
    memory_rows,
    memory_totals,
    module_run,
)
from lumos_gym.training.trainer import REPORT_FILE, grad_accum_for

RECIPE = "lumos-paper"
"""The recipe every module trains with."""

#: The agents, each evaluated once both of its modules are trained.
AGENTS: dict[str, tuple[str, str]] = {
    "lumos-i": ("plan-iterative", "ground-iterative"),
    "lumos-o": ("plan-onetime", "ground-onetime"),
}

#: The envs of the ``lumos-paper`` suite each domain's agents are scored on; ``None``: all.
DOMAIN_ENVS: dict[str, tuple[str, ...] | None] = {
    "maths": ("lumos/GSM8K-v0", "lumos/SVAMP-v0"),
    "complex_qa": ("lumos/HotpotQA-v0", "lumos/StrategyQA-v0"),
    "web_agent": ("lumos/Mind2Web-v0",),
    "unified": None,
}

# ------------------------------------------------------------------------------------ the plan
@dataclass
class Step:
    """One command of the run.

    Attributes:
        what: what it does, in words.
        argv: the command.
        done: the file whose presence means it finished.
    """

    what: str
    argv: list[str]
    done: Path


@dataclass
class PaperPlan:
    """Everything the paper run resolves to.

    Attributes:
        config: the recipe's config (the first module's data and folder).
        model: the base model.
        gpus: GPUs, one process each.
        domain: the domain whose counts and evaluation sets are used.
        runs: one per module.
        memory: the per-GPU memory rows.
        gpu_memory_gib: the card's memory.
        gpu_tflops: the card's peak dense bf16 TFLOPS.
        mfu: the assumed model FLOPs utilisation.
        steps: the commands, training first.
        notes: what the evaluation leaves out.
    """

    config: TrainConfig
    model: BaseModel
    gpus: int
    domain: str
    runs: list[ModuleRun]
    memory: list[MemoryRow]
    gpu_memory_gib: float
    gpu_tflops: float
    mfu: float
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _pick_modules(modules: Sequence[str], domain: str) -> list[str]:
    """The modules asked, checked (default: those the domain has data for)."""
    if not modules:
        return [m for m in MODULES if m in PAPER_RECORDS[domain]]
    for name in modules:
        if name not in MODULES:
            close = difflib.get_close_matches(name, MODULES, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise LumosGymError(f"unknown module {name!r}{hint}; modules: {', '.join(MODULES)}")
    return [m for m in MODULES if m in modules]


def plan_paper(
    out: str | Path, *, base_model: str = LLAMA2_7B, gpus: int = 2, domain: str = "maths",
    modules: Sequence[str] = (), data: Sequence[str] = (),
    gpu_memory_gib: float = GPU_MEMORY_GIB, gpu_tflops: float = GPU_TFLOPS, mfu: float = MFU,
    model: BaseModel | None = None,
) -> PaperPlan:
    """Resolve the paper run: settings, model, memory, data, steps and the commands.

    Args:
        out: the run's folder (``OUT/models/MODULE``, ``OUT/results/...``).
        base_model: the model to fine-tune (the paper's LLaMA-2 7B by default).
        gpus: GPUs, one training process each; 128 must divide by 2 x ``gpus``.
        domain: a key of :data:`PAPER_RECORDS` (counts without data, evaluation sets).
        modules: the modules to train (default: the domain's).
        data: ``--data`` values (``FILE`` or ``MODULE=FILE``); default: the hub files under
            ``data/lumos/``, or the paper's counts where they are not there.
        gpu_memory_gib: the card's memory.
        gpu_tflops: the card's peak dense bf16 TFLOPS.
        mfu: the model FLOPs utilisation assumed for the time estimate.
        model: the base model, already read (:func:`load_base_model`).

    Raises:
        LumosGymError: an unknown domain or module, data that cannot be told apart or read, a
            GPU count that does not divide the batch, a base model that is not on this machine.
    """
    if domain not in PAPER_RECORDS:
        raise LumosGymError(f"unknown domain {domain!r}; domains: {', '.join(PAPER_RECORDS)}")
    out = Path(out)
    chosen = _pick_modules(modules, domain)
    files = (data_by_module(data, chosen) if data
             else {m: [default_data(domain, m)] for m in chosen})
    configs = {m: config_from_recipe(RECIPE, data=files[m], base_model=base_model,
                                     out=str(out / "models" / m)) for m in chosen}
    config = configs[chosen[0]]
    try:
        grad_accum_for(config, gpus)  # the total batch must split into whole passes per GPU
    except TrainingError:
        total = config.total_batch or config.batch_size
        fits = [str(n) for n in range(1, total + 1) if total % (n * config.batch_size) == 0]
        raise LumosGymError(
            f"--gpus {gpus}: {total} records a step do not split into "
            f"{config.batch_size} per GPU on {_many(gpus, 'GPU')}; give {', '.join(fits)}"
        ) from None
    model = model or load_base_model(base_model)
    if model.arch.positions is not None and config.max_length > model.arch.positions:
        raise LumosGymError(f"{base_model!r} reads {model.arch.positions} positions, below the "
                            f"recipe's {config.max_length} tokens")
    if not data:
        lacking = [m for m in chosen if m not in PAPER_RECORDS[domain]]
        if lacking:
            raise LumosGymError(f"the paper has no {domain} data for {', '.join(lacking)}; "
                                "pass --data or other --modules")
    runs = [module_run(m, files[m], out / "models" / m, configs[m], gpus, model,
                       None if data else PAPER_RECORDS[domain][m]) for m in chosen]
    memory = memory_rows(model, gpus=gpus, micro_batch=config.batch_size,
                         seq_len=config.max_length)
    plan = PaperPlan(config, model, gpus, domain, runs, memory, gpu_memory_gib, gpu_tflops, mfu)
    plan.steps = [train_step(r, plan) for r in runs] + eval_steps(plan, out)
    absent = [f for r in runs if r.from_paper for f in r.data]
    if absent:
        plan.notes.append(
            f"{', '.join(absent)}: not here; each is the hub dataset ai2lumos/ of its name "
            "(records in the messages layout of docs/lumos-format.md §1.1), or pass --data")
    return plan


def accelerate_config() -> Path:
    """The shipped DeepSpeed ZeRO-3 accelerate config."""
    return Path(training_package.__file__).parent / "accelerate" / "deepspeed_zero3.yaml"


def shown_path(path: Path) -> str:
    """``path`` relative to the current folder when it lies inside it (as a reader runs it)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def train_step(run: ModuleRun, plan: PaperPlan) -> Step:
    """The ``accelerate launch`` command that trains one module."""
    argv = ["accelerate", "launch", "--config_file", shown_path(accelerate_config()),
            "--num_processes", str(plan.gpus), "-m", "lumos_gym.cli", "train",
            "--recipe", RECIPE]
    for path in run.data:
        argv += ["--data", path]
    argv += ["--base-model", plan.model.name, "--out", str(run.out)]
    return Step(f"train {run.module}", argv, run.out / REPORT_FILE)


def eval_steps(plan: PaperPlan, out: Path) -> list[Step]:
    """The vLLM evaluations of each agent whose two modules are trained."""
    trained = {r.module: r.out for r in plan.runs}
    envs = DOMAIN_ENVS[plan.domain]
    steps = []
    for agent, (planner, grounder) in AGENTS.items():
        if planner not in trained or grounder not in trained:
            if planner in trained or grounder in trained:
                plan.notes.append(f"{agent} is not evaluated: it needs {planner} and {grounder}")
            continue
        head = ["lumos-gym", "evaluate", "--agent", agent, "--planner", str(trained[planner]),
                "--grounder", str(trained[grounder]), "--backend", "vllm"]
        if envs is None:
            where = out / "results" / agent / "lumos-paper"
            argv = [*head, "--suite", "lumos-paper", "--out", str(where), "--resume",
                    "--no-progress"]
            steps.append(Step(f"evaluate {agent} on lumos-paper", argv, where / "summary.json"))
            continue
        for entry in get_suite("lumos-paper").entries:
            if entry.env_id not in envs:
                continue
            name = entry.env_id.split("/")[-1]
            where = out / "results" / agent / name
            argv = [*head, "--env", name]
            for key, value in entry.kwargs.items():
                shown = value if isinstance(value, str) else json.dumps(value)
                argv += ["-k", f"{key}={shown}"]
            if entry.limit is not None:
                argv += ["--limit", str(entry.limit)]
            argv += ["--out", str(where), "--resume", "--no-progress"]
            steps.append(Step(f"evaluate {agent} on {name}", argv, where / "summary.json"))
    return steps


# ---------------------------------------------------------------------------------- rendering
def _pairs(rows: Sequence[tuple[str, str]]) -> list[str]:
    """``name  value`` lines, the values aligned."""
    width = max(len(name) for name, _ in rows)
    return [f"  {name.ljust(width)}  {value}" for name, value in rows]


def _many(count: int, noun: str) -> str:
    """``1 GPU``, ``2 GPUs``."""
    return f"{count} {noun}" + ("" if count == 1 else "es" if noun.endswith("s") else "s")


def _gib(value: float) -> str:
    """Bytes as GiB, two decimals."""
    return f"{value / GIB:.2f}"


def _flops(value: float) -> str:
    """A FLOP count in scientific notation (``1.618e18``)."""
    return f"{value:.3e}".replace("e+", "e")


def settings_rows(plan: PaperPlan) -> list[tuple[str, str]]:
    """The resolved training settings, from the recipe's config."""
    c = plan.config
    accumulation = grad_accum_for(c, plan.gpus)
    return [
        ("recipe", f"{RECIPE} (lumos_gym/training/config.py)"),
        ("weights trained", "all (full fine-tuning)" if c.lora_r is None else f"LoRA r={c.lora_r}"),
        ("learning rate", f"{c.lr:g}, {c.schedule} schedule, warm-up {c.warmup_ratio:g} of the "
                          "steps"),
        ("optimizer", f"AdamW (adamw_torch), weight decay {c.weight_decay:g}, gradients clipped "
                      "at norm 1.0"),
        ("epochs", f"{c.epochs:g}" + (f" (cut at {c.max_steps} steps)" if c.max_steps else "")),
        ("tokens per record", f"{c.max_length} (longer records are cut)"),
        ("batch", f"{c.batch_size} per GPU x {_many(plan.gpus, 'GPU')} x {accumulation} "
                  f"accumulation = {c.batch_size * plan.gpus * accumulation} records a step "
                  f"(total {c.total_batch})"),
        ("batching", "packed rows" if c.pack else "padded, grouped by length"),
        ("precision", f"{c.precision}: bf16 on these GPUs (the accelerate config's "
                      "mixed_precision: bf16)"),
        ("held out", f"{c.eval_fraction:.0%} for the eval loss, every {c.eval_steps} steps "
                     "(the original held none out)"),
        ("checkpoints", f"every {c.save_steps} steps, the last {c.save_total_limit} kept"),
        ("seed", str(c.seed)),
        ("sharding", f"DeepSpeed ZeRO-3, nothing offloaded, {_many(plan.gpus, 'process')} "
                     f"({shown_path(accelerate_config())})"),
        ("evaluation", "vLLM (lumos-gym evaluate --backend vllm), greedy"),
    ]


def render_dry_run(plan: PaperPlan) -> str:
    """The dry run's report: model, settings, memory, data and compute, assumptions."""
    m, arch = plan.model, plan.model.arch
    lines = ["The Lumos paper's training run, resolved without GPUs", "", "Model"]
    lines += _pairs([
        ("base model", m.name),
        ("architecture", f"{arch.model_type}: hidden {arch.hidden}, intermediate "
                         f"{arch.intermediate}, {arch.layers} layers, {arch.heads} heads "
                         f"({arch.kv_heads} kv) of {arch.head_dim}, vocab {arch.vocab:,}, "
                         f"{arch.positions} positions"),
        ("read from", m.source),
        ("parameters", f"{m.params:,} (built on the meta device; one layer {m.layer_params:,})"),
        ("tokenizer", "found here: tokens are counted" if m.tokenizer is not None
         else "none on this machine: tokens are bounded by records x max length"),
    ])
    lines += ["", "Settings (the lumos-paper recipe, as `lumos-gym train` resolves it)"]
    lines += _pairs(settings_rows(plan))
    c = plan.config
    tokens = c.batch_size * c.max_length
    lines += ["", f"Memory per GPU (ZeRO-3 over {_many(plan.gpus, 'GPU')}; micro-batch "
              f"{c.batch_size} x {c.max_length} tokens; flash attention, so no s^2 term)"]
    rows = [(r.name, _gib(r.bytes), r.formula) for r in plan.memory]
    plain, checkpointed = memory_totals(plan.memory)
    card = plan.gpu_memory_gib * GIB
    for name, total in (("total, no checkpointing", plain),
                        ("total, checkpointing", checkpointed)):
        verdict = "fits" if total <= card else "does not fit"
        rows.append((name, _gib(total), f"{verdict} in {plan.gpu_memory_gib:g} GiB "
                                        f"({_gib(card - total)} GiB left)"))
    lines.append(table(["row", "GiB", "how"], rows))
    lines.append(f"Host memory: each process loads the fp32 model (4 B x params = "
                 f"{_gib(4 * m.params)} GiB) before DeepSpeed shards it (zero3_init_flag: false), "
                 f"{_gib(4 * m.params * plan.gpus)} GiB for {_many(plan.gpus, 'process')}.")
    from_paper = any(r.from_paper for r in plan.runs)
    where = (f"the paper's counts, {RECORD_SOURCES[plan.domain]}" if from_paper
             else "records counted in the training files")
    lines += ["", f"Data and compute (domain {plan.domain}; {where})"]
    rate = plan.gpu_tflops * 1e12 * plan.mfu
    data_rows = []
    bound = "" if all(r.counted for r in plan.runs) else "<= "
    for r in plan.runs:
        hours = (r.train_flops(m) + r.eval_flops(m)) / rate / 3600
        data_rows.append((r.module, f"{r.records:,}", f"{r.train_records:,}", f"{r.steps:,}",
                          ("" if r.counted else "<= ") + f"{r.tokens:,}",
                          _flops(r.train_flops(m)), _flops(r.eval_flops(m)), f"{hours:.2f}",
                          f"{hours / plan.gpus:.2f}"))
    hours = sum(r.train_flops(m) + r.eval_flops(m) for r in plan.runs) / rate / 3600
    data_rows.append((
        "total", f"{sum(r.records for r in plan.runs):,}",
        f"{sum(r.train_records for r in plan.runs):,}", f"{sum(r.steps for r in plan.runs):,}",
        bound + f"{sum(r.tokens for r in plan.runs):,}",
        _flops(sum(r.train_flops(m) for r in plan.runs)),
        _flops(sum(r.eval_flops(m) for r in plan.runs)), f"{hours:.2f}",
        f"{hours / plan.gpus:.2f}"))
    lines.append(table(["module", "records", "trained", "steps", "tokens", "train FLOPs",
                        "eval FLOPs", "GPU-h", f"hours on {plan.gpus}"], data_rows))
    lines += ["", "Assumptions"]
    lines += [f"- {text}" for text in assumptions(plan, tokens)]
    lines += ["", "Commands (`lumos-gym reproduce paper` without --dry-run runs them in order)"]
    lines += [f"- {step.what}: {shlex.join(step.argv)}" for step in plan.steps]
    lines += [f"- {note}" for note in plan.notes]
    return "\n".join(lines)


def assumptions(plan: PaperPlan, tokens: int) -> list[str]:
    """What the memory and compute figures assume, one line each."""
    m, c = plan.model, plan.config
    counted = all(r.counted for r in plan.runs)
    return [
        f"memory: every micro-batch at full length ({tokens:,} tokens); bf16 weights and "
        "gradients, fp32 master weights and Adam moments (16 B a parameter), all sharded "
        f"over {_many(plan.gpus, 'GPU')}",
        f"activations: {m.arch.layer_activation_bytes():,} B a token a layer (12h + 4q + 4kv + "
        "8f + 4a: docs/training.md); eager attention would add 6 x heads x length B a token",
        "not counted: DeepSpeed's prefetch and live-parameter cache (up to 1e9 parameters), "
        "communication buckets, the fp32 gradient of the optimizer's sub-group at the step, "
        "the CUDA context, allocator fragmentation",
        "tokens: counted with the base model's tokenizer after truncation" if counted else
        f"tokens: an upper bound, trained records x {c.max_length} (no tokenizer or no data "
        "here); padding is not counted",
        f"FLOPs: 6 x {m.params:,} x tokens, plus attention's 12 x layers x heads x head dim x "
        "length per token (PaLM's count, causal mask not halved); eval: 2 x params x tokens "
        "per pass",
        f"time: {plan.gpu_tflops:g} TFLOPS peak dense bf16 per GPU (H100 SXM: NVIDIA's "
        f"datasheet gives 1,979 with sparsity, 989 dense; A100: 312) at {plan.mfu:g} model "
        "FLOPs utilisation; activation recomputation, if turned on, adds a forward pass that "
        "MFU does not count",
        f"steps: ceil(trained records / {c.total_batch}) per epoch x {c.epochs:g} epochs, as "
        "the trainer counts them",
    ]


# ---------------------------------------------------------------------------------- running
def visible_gpus() -> int:
    """The CUDA GPUs this process sees (0 without torch or CUDA)."""
    try:
        import torch  # heavy: only the run itself asks
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def missing_packages(steps: Sequence[Step]) -> list[str]:
    """The packages the unfinished ``steps`` need that are not installed.

    DeepSpeed trains (the accelerate config names it) and vLLM scores.
    """
    left = [step for step in steps if not step.done.is_file()]
    needed = [("deepspeed", any(s.argv[0] == "accelerate" for s in left)),
              ("vllm", any(s.argv[0] == "lumos-gym" for s in left))]
    return [name for name, used in needed if used and importlib.util.find_spec(name) is None]


def _executable(argv: list[str]) -> list[str]:
    """``argv`` with ``accelerate``/``lumos-gym`` run by this interpreter (same environment)."""
    if argv[0] == "accelerate":
        return [sys.executable, "-m", "accelerate.commands.launch", *argv[2:]]
    if argv[0] == "lumos-gym":
        return [sys.executable, "-m", "lumos_gym.cli", *argv[1:]]
    return argv


def run_paper(
    plan: PaperPlan, *, log: Callable[[str], None] = print,
    run: Callable[[list[str]], int] | None = None,
) -> int:
    """Print the commands, check the machine, then run each unfinished step in order.

    Args:
        plan: the plan (:func:`plan_paper`).
        log: where lines go.
        run: runs one command and returns its status (default: a subprocess).

    Raises:
        LumosGymError: fewer CUDA GPUs than asked, a missing package or data file, or a step
            that failed.
    """
    for step in plan.steps:
        log(shlex.join(step.argv))
    for note in plan.notes:
        log(f"# {note}")
    seen = visible_gpus()
    if seen < plan.gpus:
        raise LumosGymError(f"the paper run needs {_many(plan.gpus, 'CUDA GPU')} and {seen} "
                            f"{'is' if seen == 1 else 'are'} visible; "
                            "`lumos-gym reproduce paper --dry-run` checks the plan without them")
    missing = missing_packages(plan.steps)
    if missing:
        raise LumosGymError(f"the paper run needs {' and '.join(missing)}: pip install "
                            f"{' '.join(missing)}")
    absent = [f for r in plan.runs if not (r.out / REPORT_FILE).is_file()
              for f in r.data if not Path(f).is_file()]
    if absent:
        raise LumosGymError(f"training file {absent[0]} does not exist: it is the hub dataset "
                            "ai2lumos/ of its name, or pass --data")
    run = run or (lambda argv: subprocess.run(_executable(argv), check=False).returncode)
    for step in plan.steps:
        if step.done.is_file():
            log(f"skip ({step.done} exists): {step.what}")
            continue
        log(f"run: {step.what}")
        status = run(step.argv)
        if status != 0:
            raise LumosGymError(f"{step.what} exited with status {status}: "
                                f"{shlex.join(step.argv)}")
    return 0


__all__ = [
    "AGENTS",
    "DOMAIN_ENVS",
    "RECIPE",
    "PaperPlan",
    "Step",
    "plan_paper",
    "render_dry_run",
    "run_paper",
]
