#!/bin/sh
# Runs the demo in one process over 4 host devices, and across processes with the launcher given
# (e.g. mpirun -np 2, 2 host devices each: 4 global devices), and checks that the final losses
# and every device's parameter mean agree within a relative 1e-4 (plus the 1e-6 the demo prints
# the loss to): the gradient sums run in another order across processes, so they may round
# differently.
#   compare_mpi_demo.sh <data_parallel_linear> <steps> <launcher and its arguments>...
set -eu
demo=$1
steps=$2
shift 2
single=$(env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u WORLD_SIZE XDEV_HOST_DEVICES=4 "$demo" --steps "$steps" --quiet) || {
  printf '%s\nthe demo failed in one process\n' "$single"
  exit 1
}
multi=$("$@" "$demo" --steps "$steps" --quiet 2>&1) || {
  printf '%s\nthe demo failed across processes\n' "$multi"
  exit 1
}
printf '%s\n%s\n' "$single" "$multi"
final() { printf '%s\n' "$1" | sed -n 's/^loss [0-9.]* -> \([0-9.]*\) .*/\1/p'; }
means() { printf '%s\n' "$1" | sed -n 's/.* parameter mean \([-0-9.e]*\)$/\1/p' | tr '\n' ' '; }
awk -v a="$(final "$single")" -v b="$(final "$multi")" -v ma="$(means "$single")" -v mb="$(means "$multi")" '
function off(x, y,   d, m) {
  d = x - y; if (d < 0) d = -d
  m = x < 0 ? -x : x
  return d > 1e-4 * m + 2e-6
}
BEGIN {
  if (a == "" || b == "") { print "COMPARISON FAILED: no final loss in the output"; exit 1 }
  if (off(a, b)) { printf "COMPARISON FAILED: final loss %s in one process, %s across processes\n", a, b; exit 1 }
  na = split(ma, sa, " "); nb = split(mb, sb, " ")
  if (na != 4 || nb != 4) { printf "COMPARISON FAILED: %d and %d parameter means, expected 4 each\n", na, nb; exit 1 }
  for (i = 1; i <= 4; ++i)
    if (off(sa[1], sb[i])) { printf "COMPARISON FAILED: parameter mean %s in one process, %s across processes\n", sa[1], sb[i]; exit 1 }
  printf "final loss %s in one process, %s across processes; parameter means %s and %s: within 1e-4\n", a, b, sa[1], sb[1]
}'
