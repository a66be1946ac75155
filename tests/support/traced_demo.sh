#!/bin/sh
# traced_demo.sh DEMO CHECKER OUT [checker options...]: runs the demo (40 steps, its own checks) with
# --trace OUT, then checks OUT with the trace checker (tests/support/trace_check_main.cpp).
set -eu
demo=$1 check=$2 out=$3
shift 3
rm -f "$out"
"$demo" --steps 40 --quiet --trace "$out"
"$check" "$out" "$@"
