#!/usr/bin/env bash
# The README's two commands: `demo` runs the main demo, `test` runs the whole test suite.
# Each installs missing Debian packages, configures, builds and runs.
#   bash cmake/xdev-run.sh demo|test [preset]
# XDEV_CONFIGURE_ARGS, when set, is added to the configure command (split at spaces), e.g.
# XDEV_CONFIGURE_ARGS=-DCMAKE_CXX_FLAGS_DEBUG=-g1 for a test run that needs no variables in its
# debug information (.ci/run).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
what=${1:-}
preset=${2:-dev}
read -r -a configure_args <<<"${XDEV_CONFIGURE_ARGS:-}"
bash cmake/install-deps.sh
case "$what" in
  demo)
    cmake --preset "$preset" "${configure_args[@]}" >/dev/null
    cmake --build --preset "$preset" --target data_parallel_linear
    "build/$preset/examples/data_parallel_linear"
    ;;
  test)
    cmake --preset "$preset" "${configure_args[@]}"
    cmake --build --preset "$preset"
    ctest --preset "$preset" -j "$(nproc)"
    ;;
  *)
    echo "usage: $0 demo|test [preset]" >&2
    exit 2
    ;;
esac
