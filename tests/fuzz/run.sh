#!/usr/bin/env bash
# Fuzzes xdev's parsers of outside input (tests/fuzz/*_fuzz.cpp) with libFuzzer, ASan and UBSan:
# builds the fuzz preset, then runs every harness (or the ones named) for SECONDS each, as many at
# once as there are cores, starting from its checked-in corpus (tests/fuzz/corpus/<harness>/).
#
#   bash tests/fuzz/run.sh              # 30 s per harness (what CI runs)
#   bash tests/fuzz/run.sh 600 elf      # the ELF inspection for 10 minutes
#
# New interesting inputs go to build/fuzz/runs/corpus/<harness>/ (the checked-in corpus is only
# read); a crash, leak or timeout leaves its input in build/fuzz/runs/findings/ and fails the run.
# Fix it, then add the input to tests/fuzz/corpus/<harness>/ so that every test run replays it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds=${1:-30}
[ $# -gt 0 ] && shift
case "$seconds" in '' | *[!0-9]*) echo "usage: $0 [seconds] [harness...]" >&2; exit 2 ;; esac

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz

bin=build/fuzz/tests/fuzz
runs=build/fuzz/runs
mkdir -p "$runs/findings"
if [ $# -gt 0 ]; then
  harnesses=("$@")
else
  harnesses=()
  for f in "$bin"/xdev_fuzz_*; do harnesses+=("${f##*/xdev_fuzz_}"); done
fi

fuzz_one() {
  local h=$1
  if [ ! -x "$bin/xdev_fuzz_$h" ]; then
    echo "no harness named $h (built: $(ls "$bin" | sed -n 's/^xdev_fuzz_//p' | tr '\n' ' '))" >"$runs/$h.log"
    return 1
  fi
  mkdir -p "$runs/corpus/$h"
  # -rss_limit_mb: an input that makes a parser allocate beyond the file's size is a finding too.
  "$bin/xdev_fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="$runs/findings/$h-" "$runs/corpus/$h" "tests/fuzz/corpus/$h" >"$runs/$h.log" 2>&1
}
export -f fuzz_one
export bin runs seconds

failed=0
rm -f "$runs/failed"
printf '%s\n' "${harnesses[@]}" | xargs -P "$(nproc)" -I{} bash -c 'fuzz_one "$1" || echo "$1" >>"$runs/failed"' _ {} || true
for h in "${harnesses[@]}"; do
  runs_done=$(sed -n 's/^stat::number_of_executed_units: *//p' "$runs/$h.log" | tail -1)
  if grep -qx "$h" "$runs/failed" 2>/dev/null; then
    failed=1
    echo "FAILED  $h: see $runs/$h.log; the input is in $runs/findings/"
    tail -n 30 "$runs/$h.log"
  else
    echo "ok      $h: ${runs_done:-?} inputs in ${seconds} s"
  fi
done
rm -f "$runs/failed"
exit $failed
