#!/bin/sh
# traced_ranks.sh DIR MERGE CHECKER DEMO LAUNCH...: runs the demo as 2 ranks under LAUNCH with
# XDEV_TRACE=DIR/step.json (each rank writes DIR/step.rank<r>.json), merges the two files with
# xdev-trace-merge, and checks the merged trace (both ranks' devices, their collectives: the local
# stage of distributed::all_reduce is an spmd reduce into local device 0).
set -eu
dir=$1 merge=$2 check=$3 demo=$4
shift 4
rm -rf "$dir"
mkdir -p "$dir"
"$@" -x XDEV_TRACE="$dir/step.json" "$demo" --steps 10 --quiet
"$merge" -o "$dir/merged.json" "$dir/step.rank0.json" "$dir/step.rank1.json"
"$check" "$dir/merged.json" --process "rank 0: HOST:0" --process "rank 1: HOST:0" --process "rank 1: HOST:1" \
  --event gemm --event "reduce over"
