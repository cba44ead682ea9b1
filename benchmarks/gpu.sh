#!/usr/bin/env bash
# The GPU measurements of docs/speed.md, in stages that each fit a 10-minute call.
#
# Needs a CUDA GPU and lumos-gym installed with the hf extra (and vllm for the vllm stages:
# `pip install -e '.[hf,vllm]'`). Every stage runs Lumos-I with the shipped adapters, greedy,
# on the same 128 MathWord episodes (levels 1-5; batch 1 on 32 of them, spread over the levels),
# and writes under $OUT (default: gpu-results/).
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

case $stage in
    vllm|demo|hf|mixed|served|all) ;;
    *)
        echo "unknown stage $stage: vllm, demo, hf, mixed, served or all" >&2
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
        served served-vllm-fp32 ;;
esac
