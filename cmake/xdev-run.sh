#!/usr/bin/env bash
# The README's two commands: `demo` runs the main demo, `test` runs the whole test suite.
# Each installs missing Debian packages, configures, builds and runs.
#   bash cmake/xdev-run.sh demo|test [preset]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
what=${1:-}
preset=${2:-dev}
bash cmake/install-deps.sh
case "$what" in
  demo)
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" --target data_parallel_linear
    "build/$preset/examples/data_parallel_linear"
    ;;
  test)
    cmake --preset "$preset"
    cmake --build --preset "$preset"
    ctest --preset "$preset" -j "$(nproc)"
    ;;
  *)
    echo "usage: $0 demo|test [preset]" >&2
    exit 2
    ;;
esac
