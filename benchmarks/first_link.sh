#!/bin/bash
# The first `link` after `prepare`. A view of this checkout's cache without what the first `link`
# of a language builds (the lexical scorers' states, the known mentions' lexical columns and
# vectors: cache/lexical, cache/linker/*.mentions), everything else shared; then per round:
#   before: `link` in that view (what the first `link` after an earlier `prepare` paid)
#   after:  `prepare` in a fresh view (all else ready), then `link`, then `prepare` again
#   benchmarks/first_link.sh [ROUNDS] [LINK ARGS...]   (default: 2 --query-lang en --langs en)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-2}; shift || true
languages=("$@"); [ ${#languages[@]} -gt 0 ] || languages=(--query-lang en --langs en)
export MELO_DATA=$(realpath "${MELO_DATA:-$root/../shared/melo}") MELO_MODELS=${MELO_MODELS:-$root/models}
view=$(mktemp -d); export MELO_CACHE=$view
fresh_view() {
  rm -rf "$view"; mkdir -p "$view/linker"
  for d in "$root"/cache/*; do
    case $(basename "$d") in lexical|linker) ;; *) ln -s "$d" "$view/" ;; esac
  done
  for f in "$root"/cache/linker/*.npy; do ln -s "$f" "$view/linker/"; done
}
timed() { /usr/bin/time -f "$1 %e s, peak RSS %M KB" "${@:2}" 2>&1 >/dev/null | tr '\r' '\n' | grep -E "peak RSS|^fitting"; }
cd "$root"
for round in $(seq "$rounds"); do
  fresh_view
  timed "round $round before: first link" python -m melo_core link --query "senior nurse" "${languages[@]}" --top 1
  fresh_view
  timed "round $round after: prepare" python -m melo_core prepare "${languages[@]}" --quiet
  timed "round $round after: first link" python -m melo_core link --query "senior nurse" "${languages[@]}" --top 1
  timed "round $round after: prepare again" python -m melo_core prepare "${languages[@]}" --quiet
done
rm -rf "$view"
