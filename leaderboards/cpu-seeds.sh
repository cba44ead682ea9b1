#!/usr/bin/env bash
# The cpu-budget training seeds of Lumos-I and integrated (issue 35), one row at a time:
#
#   bash leaderboards/cpu-seeds.sh AGENT SEED      # AGENT: lumos-i or integrated; SEED: 0-4
#
# 1. the data build (once; `reproduce` skips a finished one);
# 2. training: `reproduce offline --agents AGENT --budget cpu --seed SEED --mix-seed 0
#    --until train`, with the shipped QA tool copied in so that it is not trained again;
# 3. scoring on `compare` (`evaluate --suite compare --batch-size 16`, as every compare row);
# 4. a rescore at BOARD_COMMIT, the commit the compare board was last rescored at, from a
#    clean worktree of it, so that the board stays scored at one commit;
# 5. the row staged in leaderboards/cpu-seeds/AGENT-cpu-sSEED: this machine's folders replaced
#    (the work folder becomes `<seeds>`, the row's own folder its place on the board), the
#    episodes gzipped, the folder validated alone.
#
# Every step resumes where a killed run stopped. Lumos-I trains two models (planner and
# grounder) and integrated one, about 33 minutes a model on two cores; scoring takes about 41
# (Lumos-I) or 28 (integrated) minutes. WORK (default runs/cpu-seeds, ignored by git) holds the
# data, the adapters (4.9 MB each, not committed) and the rows being scored.
set -euo pipefail

if [ $# -ne 2 ] || ! [[ $1 =~ ^(lumos-i|integrated)$ ]] || ! [[ $2 =~ ^[0-9]+$ ]]; then
    echo "usage: bash leaderboards/cpu-seeds.sh lumos-i|integrated SEED" >&2
    exit 2
fi
agent=$1
seed=$2
board_commit=${BOARD_COMMIT:-a645266}
root=$(git rev-parse --show-toplevel)
cd "$root"
bin=$root/${VENV:-.venv}/bin
work=${WORK:-runs/cpu-seeds}
mkdir -p "$work"
work=$(cd "$work" && pwd)
row=$agent-cpu-s$seed
out=$work/s$seed
scored=$work/rows/$row
staged=$root/leaderboards/cpu-seeds/$row
say() { echo "[$(date -u +%H:%M:%S)] $row: $*"; }

if [ -f "$staged/run.json" ]; then
    say "already staged in leaderboards/cpu-seeds"
    exit 0
fi

# 1. the data build, shared by every seed
"$bin/lumos-gym" reproduce offline --out "$work" --until data --no-progress
mkdir -p "$out/models"
ln -sfn ../data "$out/data"

# 2. training
if [ ! -f "$out/models/qa-tool/lumos_training.json" ]; then
    rm -rf "$out/models/qa-tool"
    cp -r lumos_gym/models/reference/qa-smollm2-135m "$out/models/qa-tool"
fi
say "training"
"$bin/lumos-gym" reproduce offline --out "$out" --agents "$agent" --budget cpu --seed "$seed" \
    --mix-seed 0 --until train --no-progress

# 3. scoring on compare
if [ ! -f "$scored/.scored" ]; then
    say "scoring on compare"
    if [ "$agent" = lumos-i ]; then
        models=(--planner "$out/models/lumos-i/planner" --grounder "$out/models/lumos-i/grounder")
    else
        models=(--model "$out/models/integrated/policy")
    fi
    "$bin/lumos-gym" evaluate --suite compare --out "$scored" --batch-size 16 --no-progress \
        --agent "$agent" "${models[@]}" --resume
    touch "$scored/.scored"
fi

# 4. the rescore at the board's commit, run from inside a clean worktree of it: the worktree's
# lumos_gym is the one imported (checked below), so the rescore records that commit
if [ ! -f "$scored/.rescored" ]; then
    at=$work/at-$board_commit
    [ -d "$at" ] || git worktree add --detach "$at" "$board_commit"
    imported=$(cd "$at" && "$bin/python" -c "import lumos_gym; print(lumos_gym.__file__)")
    case $imported in
        "$at"/*) ;;
        *) echo "the rescore would import $imported, not the worktree's code" >&2; exit 1 ;;
    esac
    say "rescoring at $board_commit"
    (cd "$at" && "$bin/python" -c "import sys; from lumos_gym.cli import main; sys.exit(main())" \
        rescore "$scored")
    touch "$scored/.rescored"
fi

# 5. staged for the board
mkdir -p "$staged.tmp"
for name in run.json summary.json episodes.jsonl; do
    sed -e "s#$scored#leaderboards/compare/$row#g" -e "s#$work#<seeds>#g" \
        "$scored/$name" > "$staged.tmp/$name"
done
gzip -n -9 "$staged.tmp/episodes.jsonl"
if grep -rl --null -e "$root" -e "$HOME/" "$staged.tmp" | grep -zq .; then
    echo "a path of this machine is left in $staged.tmp" >&2
    exit 1
fi
"$bin/lumos-gym" leaderboard --validate "$staged.tmp" --suite compare
rm -rf "$staged"
mv "$staged.tmp" "$staged"
say "staged in leaderboards/cpu-seeds/$row"
