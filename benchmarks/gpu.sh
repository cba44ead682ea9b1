#!/usr/bin/env bash
# The GPU measurements of docs/speed.md and docs/training.md, in stages that each fit a
# 10-minute call.
#
# Needs a CUDA GPU and lumos-gym installed with the hf extra (and vllm for the vllm stages:
# `pip install -e '.[hf,vllm]'`). Every rollout stage (vllm to served) runs Lumos-I with the
# shipped adapters, greedy, on the same 128 MathWord episodes (levels 1-5; batch 1 on 32 of
# them, spread over the levels); paper and multi size and run training. All write under $OUT
# (default: gpu-results/).
#
#   bash benchmarks/gpu.sh vllm [CPU_OUTPUTS]   vLLM (bf16 and fp32) at batch 1 and 32
#   bash benchmarks/gpu.sh demo                 the offline suite on vLLM fp32 and bf16, each
#                                               compared with the shipped hf run, output by output
#   bash benchmarks/gpu.sh hf [CPU_OUTPUTS]     hf on CUDA in fp32, batch 1 and 32
#   bash benchmarks/gpu.sh mixed [CPU_OUTPUTS]  mixed-adapter batches against apart, batch 32
#   bash benchmarks/gpu.sh served               `vllm serve --enable-lora` with the shipped
#                                               planner and grounder as two LoRA modules, the
#                                               offline suite evaluated through the openai
#                                               backend, compared with the shipped hf run
#   bash benchmarks/gpu.sh paper                `lumos-gym reproduce paper --dry-run` with this
#                                               card's memory (nvidia-smi): the paper's 7B run
#                                               sized, no weights loaded
#   bash benchmarks/gpu.sh multi                `lumos-gym train` on 2 GPUs under `accelerate
#                                               launch`: plain DDP, the shipped fsdp.yaml, and
#                                               deepspeed_zero3.yaml where DeepSpeed is
#                                               installed; SmolLM2-135M for 4 steps each
#                                               (skipped on 1 GPU)
#   bash benchmarks/gpu.sh all [CPU_OUTPUTS]    every stage, in that order
#
# CPU_OUTPUTS (optional): the same episodes' outputs from a CPU run, so that "same outputs"
# compares every GPU episode with the CPU's, made on a CPU with
#   python benchmarks/rollout.py --engines openvino --batch-sizes 16 --save-outputs cpu.json \
#       --env lumos/MathWord-v0 --env-kwargs '{"split": "test", "levels": [1, 2, 3, 4, 5],
#       "num_tasks": 40}' --episodes 128
# Without it each engine is compared with its own first row. One process an engine: vLLM holds
# its share of the GPU's memory until its process ends.
set -euo pipefail
stage=${1:-all}
cpu=${2:-}
out=${OUT:-gpu-results}
python=${PYTHON:-python}
here=$(cd "$(dirname "$0")" && pwd)
episodes=(--env lumos/MathWord-v0
          --env-kwargs '{"split": "test", "levels": [1, 2, 3, 4, 5], "num_tasks": 40}'
          --episodes 128 --batch1-episodes 32)
compare=()
if [ -n "$cpu" ]; then compare=(--compare-to "$cpu"); fi

rollout() {  # rollout NAME ENGINE BATCH...: one process, its table in $out/NAME.txt
    local name=$1 engine=$2
    shift 2
    PYTHONUNBUFFERED=1 "$python" "$here/rollout.py" "${episodes[@]}" "${compare[@]}" \
        --engines "$engine" --batch-sizes "$@" --save-outputs "$out/$name.json" \
        | tee "$out/$name.txt"
}

demo() {  # demo NAME DTYPE: the offline suite on vLLM, then compared with the shipped hf run
    local name=$1 dtype=$2
    local shipped="$here/../leaderboards/offline/lumos-i"
    "$python" -m lumos_gym.cli evaluate --agent lumos-i --backend vllm --dtype "$dtype" \
        --out "$out/$name" --resume --no-progress | tail -n 3
    "$python" -m lumos_gym.cli leaderboard --compare "$out/$name" "$shipped" \
        | tee "$out/$name.md" | sed -n '/^| suite score/p;/^## The same outputs/,$p'
}

served() {  # served NAME: vLLM's OpenAI server with both adapters, lumos-gym as its client
    local name=$1 port=${VLLM_PORT:-8011}
    local shipped="$here/../leaderboards/offline/lumos-i"
    local base adapters
    base=$("$python" -c 'from lumos_gym.models.sources import resolve_model
print(resolve_model("smollm2-135m").path)')
    adapters=$("$python" -c 'from lumos_gym.models.reference import reference_models as r
print(" ".join(f"lumos-i-{k}={v}" for k, v in r("lumos-i").items()))')
    # shellcheck disable=SC2086  # the adapters are two NAME=FOLDER words
    "$python" -m vllm.entrypoints.openai.api_server --model "$base" --port "$port" \
        --enable-lora --max-lora-rank 64 --lora-modules $adapters --dtype float32 \
        > "$out/$name-server.log" 2>&1 &
    local server=$!
    "$python" -m lumos_gym.cli evaluate --agent lumos-i --backend openai \
        --base-url "http://127.0.0.1:$port/v1" --model-args wait=600 \
        --out "$out/$name" --resume --no-progress | tail -n 3 || true
    kill "$server"; wait "$server" || true
    "$python" -m lumos_gym.cli leaderboard --compare "$out/$name" "$shipped" \
        | tee "$out/$name.md" | sed -n '/^| suite score/p;/^## The same outputs/,$p'
}

paper() {  # paper: the dry run of the paper's 7B run, against this card's memory in GiB
    local mib gib
    mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -n 1)
    gib=$(awk -v mib="$mib" 'BEGIN { printf "%.1f", mib / 1024 }')
    "$python" -m lumos_gym.cli reproduce paper --dry-run --gpu-memory-gb "$gib" \
        | tee "$out/paper-dry-run.txt"
}

launch() {  # launch NAME ACCELERATE_FLAGS...: 4 steps of `lumos-gym train` into $out/NAME
    local name=$1
    shift
    rm -rf "${out:?}/$name"  # train refuses a folder that holds a run; this stage measures anew
    # a failed launch is reported and the next one still runs
    PYTHONUNBUFFERED=1 "$python" -m accelerate.commands.launch "$@" -m lumos_gym.cli train \
        --data "$out/multi-train.jsonl" --base-model smollm2-135m --out "$out/$name" \
        --max-steps 4 --batch-size 2 --total-batch 8 --max-length 256 --eval-fraction 0 \
        --save-steps 2 --report-to none > "$out/$name.log" 2>&1 \
        || echo "$name: accelerate launch failed, see $out/$name.log"
    tail -n 3 "$out/$name.log"
}

multi() {  # multi: DDP, FSDP and ZeRO-3 over 2 GPUs, each a short LoRA run of the default model
    local gpus i cfg
    gpus=$(nvidia-smi -L | wc -l)
    if [ "$gpus" -lt 2 ]; then
        echo "multi: needs 2 GPUs, $gpus here; skipped" | tee "$out/multi.txt"
        return 0
    fi
    for i in $(seq 1 32); do
        printf '{"dataset": "maths", "id": "m%s", "messages": [{"role": "user", "content": "Task: add %s and 2"}, {"role": "assistant", "content": "Subgoal 1: Calculate %s + 2."}]}\n' "$i" "$i" "$i"
    done > "$out/multi-train.jsonl"
    cfg=$("$python" -c 'import lumos_gym.training as t, pathlib
print(pathlib.Path(t.__file__).parent / "accelerate")')
    # the alias's safetensors copy, made once here rather than by two processes at a time
    "$python" -c 'from lumos_gym.models.hf import ensure_alias_cache as e; e("smollm2-135m")'
    launch multi-ddp --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision bf16 \
        --dynamo_backend no
    launch multi-fsdp --config_file "$cfg/fsdp.yaml" --num_processes 2
    if "$python" -c 'import deepspeed' 2> /dev/null; then
        launch multi-deepspeed --config_file "$cfg/deepspeed_zero3.yaml" --num_processes 2
    else
        echo "multi-deepspeed: skipped, deepspeed is not installed (pip install deepspeed)"
    fi
    "$python" -c 'import json, pathlib, sys
for name in sys.argv[2:]:
    report = pathlib.Path(sys.argv[1], name, "lumos_training.json")
    if not report.is_file():
        print(f"{name}: no report (the launch failed)")
        continue
    r = json.loads(report.read_text())
    device, steps, first, last, speed = (r[key] for key in (
        "device", "steps", "first_loss", "final_loss", "tokens_per_second"))
    print(f"{name}: {device}, {steps} steps, loss {first:.3f} -> {last:.3f}, {speed} tokens/s")' \
        "$out" multi-ddp multi-fsdp multi-deepspeed | tee "$out/multi.txt"
}

case $stage in
    vllm|demo|hf|mixed|served|paper|multi|all) ;;
    *)
        echo "unknown stage $stage: vllm, demo, hf, mixed, served, paper, multi or all" >&2
        exit 2 ;;
esac
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
    || echo "nvidia-smi failed: is there a CUDA GPU?"; } | tee "$out/gpu.txt"
case $stage in
    vllm|all)
        rollout vllm-fp32 vllm-fp32 1 32
        rollout vllm vllm 1 32 ;;&
    demo|all)
        demo demo-vllm-fp32 float32
        demo demo-vllm auto ;;&
    hf|all)
        rollout hf-cuda-fp32 hf-cuda-fp32 1 32 ;;&
    mixed|all)
        rollout vllm-mixed vllm-mixed 32
        rollout hf-cuda-fp32-mixed hf-cuda-fp32-mixed 32 ;;&
    served|all)
        served served-vllm-fp32 ;;&
    paper|all)
        paper ;;&
    multi|all)
        multi ;;
esac
