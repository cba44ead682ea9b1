#!/usr/bin/env bash
# The last step of the cpu-budget training seeds (issue 35): once leaderboards/cpu-seeds.sh has
# staged and committed every row, they join `compare` and its boards are made again.
#
#   bash leaderboards/cpu-seeds-join.sh
#
# 1. refuses unless each row (lumos-i and integrated at every seed of SEEDS, default 0-4) is
#    staged in leaderboards/cpu-seeds/ and committed, and the tree is clean: no seed is left
#    out, and the boards are made from committed rows only;
# 2. moves the rows to leaderboards/compare/ (`git mv`; their run.json already names that
#    place, as cpu-seeds.sh wrote it);
# 3. validates every compare row at once (one scoring commit; ReAct's infra errors allowed, as
#    leaderboards/README.md says);
# 4. renders LEADERBOARD.md and html/leaderboard.html (reference: the gpu-budget Lumos-I
#    group, as before) and a new board of the cpu rows alone (CPU-SEEDS), whose reference is
#    the cpu-budget Lumos-I group: there the two cpu groups compare under one budget and one
#    set of round limits.
#
# It commits nothing: the README's ordering sentence and the docs are written from the new
# boards, by hand, in the same commit as the boards.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
bin=$root/${VENV:-.venv}/bin
seeds=${SEEDS:-0 1 2 3 4}

if [ -n "$(git status --porcelain -- leaderboards)" ]; then
    echo "leaderboards/ has uncommitted changes: commit or remove them first" >&2
    exit 1
fi
rows=()
for agent in lumos-i integrated; do
    for seed in $seeds; do
        row=$agent-cpu-s$seed
        if [ -d "leaderboards/compare/$row" ]; then
            continue  # joined by an earlier run of this script
        fi
        if ! git ls-files --error-unmatch "leaderboards/cpu-seeds/$row/run.json" >/dev/null 2>&1
        then
            echo "$row is not staged and committed in leaderboards/cpu-seeds/:" \
                "run bash leaderboards/cpu-seeds.sh $agent $seed first" >&2
            exit 1
        fi
        rows+=("$row")
    done
done

for row in "${rows[@]}"; do
    git mv "leaderboards/cpu-seeds/$row" "leaderboards/compare/$row"
    echo "moved $row to leaderboards/compare/"
done

"$bin/lumos-gym" leaderboard --validate leaderboards/compare/* --suite compare \
    --allow-infra-errors

lb() { "$bin/lumos-gym" leaderboard "$@"; }
lb leaderboards/compare/* --suite compare --paper --reference lumos-i-s0 \
    --out leaderboards/LEADERBOARD.md
lb leaderboards/compare/* --suite compare --paper --reference lumos-i-s0 --format html \
    --no-trajectories --out leaderboards/html/leaderboard.html
# the cpu groups' board is new: this script makes it (no doc names the file before it exists)
cpu_board=leaderboards/CPU-SEEDS
lb leaderboards/compare/*-cpu-s* leaderboards/compare/oracle --suite compare --paper \
    --reference lumos-i-cpu-s0 --out "$cpu_board.md"
echo "boards made; write the README's ordering sentence from $cpu_board.md and"
echo "commit the boards, the moved rows and the docs together"
