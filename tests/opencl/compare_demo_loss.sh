#!/bin/sh
# Runs the demo on HOST and on OPENCL with the same number of devices and steps, and checks that the
# final losses agree within 0.1% (plus the 1e-6 the demo prints them to): floating-point sums on the
# two backends may differ in order.
#   compare_demo_loss.sh <data_parallel_linear> <devices> <steps>
set -eu
demo=$1
devices=$2
steps=$3
host=$(XDEV_DEVICE=HOST XDEV_HOST_DEVICES="$devices" "$demo" --devices "$devices" --steps "$steps" --quiet) || {
  printf '%s\nthe demo failed on HOST\n' "$host"
  exit 1
}
opencl=$(XDEV_DEVICE=OPENCL "$demo" --devices "$devices" --steps "$steps" --quiet) || {
  printf '%s\nthe demo failed on OPENCL\n' "$opencl"
  exit 1
}
printf '%s\n%s\n' "$host" "$opencl"
final() { printf '%s\n' "$1" | sed -n 's/^loss [0-9.]* -> \([0-9.]*\) .*/\1/p'; }
awk -v a="$(final "$host")" -v b="$(final "$opencl")" 'BEGIN {
  if (a == "" || b == "") { print "COMPARISON FAILED: no final loss in the output"; exit 1 }
  d = a - b; if (d < 0) d = -d
  m = a > b ? a : b
  if (d > 1e-3 * m + 2e-6) { printf "COMPARISON FAILED: final loss %s on HOST, %s on OPENCL\n", a, b; exit 1 }
  r = (m > 0) ? d / m : 0
  printf "final loss %s on HOST, %s on OPENCL: relative difference %.2g\n", a, b, r
}'
