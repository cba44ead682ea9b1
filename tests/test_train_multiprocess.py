"""Training on several processes, proven on CPUs: ``accelerate launch --multi_gpu`` over gloo.

A tiny Llama built here trains for a few steps on one process and on two (DDP): the losses of
every step and the saved adapter agree. A two-process run killed with SIGKILL resumes from its
checkpoint with two processes and with one, ending where an uninterrupted run ends. The
shipped FSDP config, which accelerate runs as plain DDP on CPUs, is refused rather than run
unsharded; FSDP2 itself (torch's ``fully_shard``, one unit per decoder layer as ``fsdp.yaml``
asks) shards a LoRA Llama over two CPU processes and trains as one process does; the merge
after a multi-process run works.

Slow tier (``make test-slow``): each launch starts two Python processes that import torch.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
from conftest import save_tiny_model  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

import lumos_gym.training  # noqa: E402

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[1]
ACCELERATE = [sys.executable, "-m", "accelerate.commands.launch"]
#: One machine, two processes; --multi_gpu is accelerate's multi-process launcher, which runs
#: on CPUs over gloo when no GPU is visible (its --cpu flag starts one process only).
TWO = [*ACCELERATE, "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
       "--mixed_precision", "no", "--dynamo_backend", "no"]
#: Loss agreement between one and two processes: the same rows make each optimizer step and
#: gloo's all-reduce only reorders float sums.
LOSS_TOLERANCE = 1e-4
#: The adapters are saved in bf16, whose step near the weights' size (0.2) is 1/1024.
ADAPTER_TOLERANCE = 2e-3


def _records(path: Path, count: int = 64) -> Path:
    """``count`` records of about 90 tokens: one a packed row of 128, so rows == records."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            nums = [(i * 7 + k * 3) % 9 + 1 for k in range(6)]
            steps = " ".join(f"Subgoal {k + 1}: Calculate {a} + {b}."
                             for k, (a, b) in enumerate(zip(nums, nums[1:], strict=False)))
            f.write(json.dumps({"dataset": "maths", "id": f"m{i}", "messages": [
                {"role": "user", "content": "Task: add " + " and ".join(map(str, nums))},
                {"role": "assistant", "content": steps}]}) + "\n")
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mp")
    save_tiny_model(folder / "tiny")
    _records(folder / "train.jsonl")
    return folder


def _train_args(work: Path, out: Path, *extra: str) -> list[str]:
    return ["-m", "lumos_gym.cli", "train", "--data", str(work / "train.jsonl"),
            "--base-model", str(work / "tiny"), "--out", str(out), "--lr", "1e-2",
            "--eval-fraction", "0", "--max-length", "128", "--report-to", "none",
            "--device", "cpu", "--threads", "1", "--seed", "0", "--logging-steps", "1",
            *([] if "--no-pack" in extra else ["--pack"]), *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(CHECKOUT), "OMP_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _losses(out: Path) -> dict[int, float]:
    state = json.loads((out / "lumos_training.json").read_text())
    assert state["steps"] > 0
    last = max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    history = json.loads((last / "trainer_state.json").read_text())["log_history"]
    return {e["step"]: e["loss"] for e in history if "loss" in e}


def _assert_adapters_close(a: Path, b: Path) -> None:
    left = load_file(a / "adapter_model.safetensors")
    right = load_file(b / "adapter_model.safetensors")
    assert sorted(left) == sorted(right)
    worst = max((left[k].float() - right[k].float()).abs().max().item() for k in left)
    assert worst <= ADAPTER_TOLERANCE, worst


def _assert_losses_close(a: dict[int, float], b: dict[int, float]) -> None:
    assert a.keys() == b.keys()
    for step in a:
        assert abs(a[step] - b[step]) <= LOSS_TOLERANCE * abs(a[step]), (step, a[step], b[step])


def test_ddp_on_two_cpu_processes_trains_what_one_process_trains(work):
    one, two = work / "one", work / "two"
    _run([sys.executable, *_train_args(work, one, "--max-steps", "8", "--batch-size", "4")],
         work)
    _run([*TWO, *_train_args(work, two, "--max-steps", "8", "--batch-size", "2")], work)
    _assert_losses_close(_losses(one), _losses(two))
    _assert_adapters_close(one, two)
    report = json.loads((two / "lumos_training.json").read_text())
    assert report["device"] == "2 x cpu" and report["epochs"] == 0.5  # 8 steps x 4 of 64 rows
    sessions = json.loads((two / "lumos_train_sessions.json").read_text())
    assert [(s["processes"], s["rows_per_step"]) for s in sessions] == [(2, 4)]
    # the merge runs on one process, after the multi-process run
    merged = work / "merged"
    _run([sys.executable, "-m", "lumos_gym.cli", "merge", str(two), "--out", str(merged)], work)
    assert (merged / "config.json").is_file() and any(merged.glob("*.safetensors"))


def _kill_when_checkpointed(command: list[str], out: Path, cwd: Path, step: int) -> None:
    """Start ``command`` and SIGKILL its whole process group once ``checkpoint-step`` is done."""
    process = subprocess.Popen(command, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    done = out / f"checkpoint-{step}" / "trainer_state.json"
    deadline = time.monotonic() + 300
    try:
        while not done.is_file():
            assert process.poll() is None, process.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint in 300 s"
            time.sleep(0.01)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()


def _whole_and_killed(work: Path, prefix: str, launcher: list[str],
                      flags: list[str]) -> tuple[Path, Path]:
    """One uninterrupted one-process run, and a ``launcher`` run SIGKILLed at its step 8."""
    whole, killed = work / f"{prefix}whole", work / f"{prefix}killed"
    _run([sys.executable, *_train_args(work, whole, *flags)], work)
    _kill_when_checkpointed([*launcher, *_train_args(work, killed, *flags)], killed, work, 8)
    assert not (killed / "lumos_training.json").exists()  # it did not finish
    return whole, killed


def test_a_killed_two_process_run_resumes_with_two_processes_and_with_one(work):
    # --total-batch 4 with --batch-size 2: one process accumulates 2 passes, two take 1 each,
    # so the same rows make each optimizer step whatever the count
    flags = ["--max-steps", "40", "--save-steps", "4", "--batch-size", "2",
             "--total-batch", "4"]
    whole, killed = _whole_and_killed(work, "", TWO, flags)
    for name, launcher in (("again-two", TWO), ("again-one", [sys.executable])):
        folder = work / name
        shutil.copytree(killed, folder)
        _run([*launcher, *_train_args(work, folder, *flags, "--resume")], work)
        # the history holds the steps before the kill (from the checkpoint) and after it
        _assert_losses_close(_losses(folder), _losses(whole))
        _assert_adapters_close(whole, folder)
        sessions = json.loads((folder / "lumos_training.json").read_text())["sessions"]
        assert [s["processes"] for s in sessions] == [2, 2 if name == "again-two" else 1]
        assert sessions[-1]["from_step"] >= 8 and sessions[-1]["to_step"] == 40


def test_a_resume_that_would_change_the_rows_of_a_step_is_refused(work):
    out = work / "fixed-accumulation"
    _run([*TWO, *_train_args(work, out, "--max-steps", "4", "--save-steps", "2",
                             "--batch-size", "2")], work)
    (out / "lumos_training.json").unlink()  # as a run killed after its last checkpoint
    done = subprocess.run([sys.executable, *_train_args(
        work, out, "--max-steps", "4", "--save-steps", "2", "--batch-size", "2", "--resume")],
        cwd=work, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "took 4 rows an optimizer step, and 2 now" in done.stderr
    assert "--total-batch" in done.stderr
    # length-grouped batches are ordered by the process count: another count is refused
    out = work / "grouped"
    grouped = ["--max-steps", "4", "--save-steps", "2", "--batch-size", "2", "--total-batch",
               "4", "--no-pack"]
    _run([*TWO, *_train_args(work, out, *grouped)], work)
    done = subprocess.run([sys.executable, *_train_args(work, out, *grouped, "--resume")],
                          cwd=work, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "ran on 2 process(es) with length-grouped batches" in done.stderr


#: The shipped FSDP config (FSDP2, one unit per decoder layer, sharded checkpoints) on two CPU
#: processes; bf16 autocast off, so its losses compare with fp32 runs.
FSDP = [*ACCELERATE, "--config_file",
        str(Path(lumos_gym.training.__file__).parent / "accelerate" / "fsdp.yaml"),
        "--num_processes", "2", "--mixed_precision", "no", "--dynamo_backend", "no"]


def test_fsdp_through_the_trainer_on_two_cpu_processes_trains_what_one_process_trains(work):
    one, fsdp = work / "fsdp-one", work / "fsdp"
    _run([sys.executable, *_train_args(work, one, "--max-steps", "8", "--batch-size", "4")],
         work)
    _run([*FSDP, *_train_args(work, fsdp, "--max-steps", "8", "--batch-size", "2",
                              "--save-steps", "4")], work)
    _assert_losses_close(_losses(one), _losses(fsdp))
    _assert_adapters_close(one, fsdp)
    # sharded checkpoints: each process wrote its own shard of the model and the optimizer
    shards = sorted(p.name for p in (fsdp / "checkpoint-8" / "pytorch_model_fsdp_0").iterdir())
    assert [name for name in shards if name.endswith(".distcp")] == ["__0_0.distcp",
                                                                     "__1_0.distcp"]
    assert (fsdp / "checkpoint-8" / "optimizer_0").is_dir()
    merged = work / "fsdp-merged"
    _run([sys.executable, "-m", "lumos_gym.cli", "merge", str(fsdp), "--out", str(merged)], work)
    assert (merged / "config.json").is_file() and any(merged.glob("*.safetensors"))


def test_a_killed_fsdp_run_resumes_from_its_sharded_checkpoint_under_fsdp(work):
    flags = ["--max-steps", "16", "--save-steps", "4", "--batch-size", "2",
             "--total-batch", "4"]
    whole, killed = _whole_and_killed(work, "fsdp-", FSDP, flags)
    again = work / "fsdp-again"
    shutil.copytree(killed, again)
    _run([*FSDP, *_train_args(work, again, *flags, "--resume")], work)
    _assert_losses_close(_losses(again), _losses(whole))
    _assert_adapters_close(whole, again)
    sessions = json.loads((again / "lumos_training.json").read_text())["sessions"]
    assert [s["processes"] for s in sessions] == [2, 2] and sessions[-1]["from_step"] >= 8
    # one process without FSDP cannot read the shards: refused before training, named
    done = subprocess.run([sys.executable, *_train_args(work, killed, *flags, "--resume")],
                          cwd=work, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "was written by FSDP" in done.stderr and "--config_file fsdp.yaml" in done.stderr


#: FSDP2 below accelerate: the tiny Llama with a LoRA adapter, one ``fully_shard`` unit per
#: decoder layer and one for the whole (fsdp.yaml's TRANSFORMER_BASED_WRAP), three AdamW steps on
#: a global batch of 4 split over the ranks; rank 0 prints each step's mean loss and how many
#: of a layer weight's rows it holds.
FSDP2_SCRIPT = """
import sys
import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, sys.argv[1])
from conftest import build_model, build_tokenizer

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = get_peft_model(build_model(build_tokenizer(), 128),
                       LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))
mesh = init_device_mesh("cpu", (world,))
layers = model.base_model.model.model.layers
for layer in layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
weight = layers[0].mlp.down_proj.base_layer.weight
print("rows", weight.to_local().shape[0], "of", weight.shape[0], flush=True)
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
ids = torch.randint(5, 100, (4, 32), generator=torch.Generator().manual_seed(1))
share = ids[rank * 4 // world:(rank + 1) * 4 // world]
for step in range(3):
    loss = model(input_ids=share, labels=share).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    if rank == 0:
        print("loss", step, (mean / world).item(), flush=True)
dist.destroy_process_group()
"""


def test_fsdp2_shards_a_lora_llama_on_two_cpu_processes_and_trains_as_one(work):
    script = work / "fsdp2.py"
    script.write_text(FSDP2_SCRIPT)
    said = {}
    for processes in (1, 2):
        done = _run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                     "--nproc_per_node", str(processes), str(script),
                     str(Path(__file__).parent)], work)
        said[processes] = [line.split() for line in done.stdout.splitlines()]
    rows = {n: next(line for line in said[n] if line[0] == "rows") for n in said}
    assert int(rows[2][1]) * 2 == int(rows[2][3]) == int(rows[1][1])  # half of it on each rank
    losses = {n: [float(line[2]) for line in said[n] if line[0] == "loss"] for n in said}
    assert len(losses[1]) == len(losses[2]) == 3
    for one, two in zip(losses[1], losses[2], strict=True):
        assert abs(one - two) <= LOSS_TOLERANCE * abs(one), (losses[1], losses[2])
    assert losses[1][-1] < losses[1][0]  # it learns
