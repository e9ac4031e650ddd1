#!/bin/bash
# link --input on MELO datasets' queries as a user runs it, with the query language detected (this
# checkout) against unknown (OLD: a checkout before detection, e.g. `git worktree add /tmp/old-link
# 2318aad`), both sharing this checkout's cache and models; scored by benchmarks/link_titles.py.
#   benchmarks/query_language.sh OLD PIPELINE OUT.csv DATASET...
# OLD `-` runs the detected side alone (the unknown side is the old checkout's and does not change).
# Each dataset is linked over its corpus languages with its country held out of the known mentions.
set -euo pipefail
old=$1; [ "$old" = - ] || old=$(realpath "$old"); pipeline=$2; out=$(realpath "$3"); shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
export MELO_DATA=$(realpath "${MELO_DATA:-$root/../shared/melo}")
work=$(mktemp -d)
for dataset in "$@"; do
  country=${dataset%%_*}; langs=${dataset##*_c_}
  python "$root/benchmarks/link_titles.py" --dataset "$dataset" --write-input "$work/$dataset.csv" > /dev/null
  (cd "$root" && python -m melo_core prepare --pipeline "$pipeline" --langs "$langs" --quiet > /dev/null)
  sides=(detected:"$root"); [ "$old" = - ] || sides+=(unknown:"$old")
  for side in "${sides[@]}"; do
    name=${side%%:*}; checkout=${side#*:}
    (cd "$checkout" && MELO_CACHE="$root/cache" MELO_MODELS="$root/models" python -m melo_core link --quiet \
      --input "$work/$dataset.csv" --column query --langs "$langs" --hold-out-country "$country" \
      --pipeline "$pipeline" --top 100 --out "$work/$dataset-$name.csv")
    python "$root/benchmarks/link_titles.py" --dataset "$dataset" --links "$work/$dataset-$name.csv" \
      --label "$pipeline $dataset $name" --out "$out"
  done
done
rm -rf "$work"
