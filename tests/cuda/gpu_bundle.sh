#!/usr/bin/env bash
# Packs what the CUDA checks need into one folder that can be copied to a machine with an NVIDIA
# GPU but without this machine's packages (docs/cuda.md, "Running the checks on a GPU machine"):
# the CUDA plugin, its tests and op suite, the demo, xdev-info and bench_cuda from a Release build
# with CUDA, the shared libraries they use that are not glibc's, libstdc++ or CUDA's (Open MPI,
# Google Benchmark, ...), and run.sh, which runs every check and writes each one's whole output to
# a folder. cuBLAS is not packed: it comes with the CUDA toolkit there (/usr/local/cuda/lib64).
#
#   tests/cuda/gpu_bundle.sh [bundle-dir] [build-dir]     # defaults: gpu, build/gpu
#   <bundle-dir>/run.sh [output-dir]                      # on the GPU machine; default: $OUT or .
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bundle=${1:-gpu}
build=${2:-build/gpu}
targets=(xdev_cuda xdev_cuda_tests xdev_cuda_op_suite_tests data_parallel_linear bench_cuda xdev-info)

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake --preset release -B "$build" -DXDEV_BUILD_CUDA=ON -DXDEV_HEADER_CHECK=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-90-real}" >/dev/null
fi
cmake --build "$build" --target "${targets[@]}"
if [ ! -f "$build/plugins/libxdev_plugin_cuda.so" ]; then
  echo "gpu_bundle.sh: $build has no CUDA plugin (is the CUDA toolkit there? see its CMake output)" >&2
  exit 1
fi

rm -rf "$bundle"
mkdir -p "$bundle/plugins" "$bundle/lib"
programs=("$build/tests/cuda/xdev_cuda_tests" "$build/tests/cuda/xdev_cuda_op_suite_tests"
          "$build/examples/data_parallel_linear" "$build/benchmarks/bench_cuda" "$build/tools/xdev-info")
cp "${programs[@]}" "$bundle/"
cp "$build/plugins/libxdev_plugin_cuda.so" "$bundle/plugins/"
# What the dynamic loader resolves outside glibc, libstdc++, libgcc and CUDA's own libraries.
for f in "${programs[@]}" "$build/plugins/libxdev_plugin_cuda.so"; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt)\.so|/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
strip "$bundle"/xdev* "$bundle"/bench_cuda "$bundle"/data_parallel_linear "$bundle"/plugins/*.so "$bundle"/lib/*.so* 2>/dev/null || true

cat >"$bundle/run.sh" <<'EOF'
#!/usr/bin/env bash
# Every CUDA check, each step's whole output in <output-dir> (default: $OUT, else .), a summary on
# stdout. XDEV_TEST_DEVICES=CUDA: a missing GPU is a failure, not a skip.
cd "$(dirname "${BASH_SOURCE[0]}")"
out=${1:-${OUT:-.}}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
export XDEV_PLUGIN_PATH=$PWD/plugins XDEV_TEST_DEVICES=CUDA
t0=$SECONDS
step() {  # step <name> <seconds> <command...>: its output in $out/<name>.txt, its summary here
  local name=$1 limit=$2
  shift 2
  echo "=== $name ($((SECONDS - t0)) s)"
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  echo "exit $?"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^ratio|goal|loss|fell|failed|error|refused' "$out/$name.txt" | tail -25
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
step info 30 ./xdev-info --backend CUDA
step tests 120 ./xdev_cuda_tests
step op_suite 120 ./xdev_cuda_op_suite_tests
step demo 60 env XDEV_DEVICE=CUDA ./data_parallel_linear --devices 1 --steps 40
step tests_host_func 100 env XDEV_CUDA_COMPLETION=host_func ./xdev_cuda_tests
step bench "${BENCH_SECONDS:-150}" ./bench_cuda --xdev_check_goals
echo "=== done ($((SECONDS - t0)) s)"
EOF
chmod +x "$bundle/run.sh"
du -sh "$bundle"
