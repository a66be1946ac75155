// The demo: data-parallel training of a linear model (128 inputs -> 10 outputs, MSE loss, SGD,
// fixed seed) over every device of a mesh, with nothing in the program naming a backend.
//
//   data_parallel_linear [--steps N] [--devices N] [--quiet] [--trace FILE.json]
//
// The mesh is every device of the selected backend (XDEV_DEVICE; HOST by default, with 4 host
// devices unless XDEV_HOST_DEVICES says otherwise), or its first --devices N. Each step:
//   1. the global batch is placed on the SPMD virtual device (host memory: nothing moves yet);
//   2. mark_sharding sends every device its own rows of the batch, and only those (the next
//      step's batch is placed while this step computes: mark_sharding is asynchronous);
//   3. every device computes its gradient with the portable ops (gemm, axpy, dot);
//   4. all_reduce(mean) averages the gradients over the mesh axis "data";
//   5. every device applies the same SGD update to its own copy of the parameters.
// At the end it prints every device's parameter mean (identical across devices) and exits with
// status 1 unless the loss fell to a tenth of its first value and the means agree exactly.
// --trace FILE.json records what every device did (xdev::trace) and says where the file went:
// open it in ui.perfetto.dev (docs/observability.md walks through one step). Across processes
// every rank writes its own file, FILE.rank<N>.json.
//
// Across processes (when built with the MPI component, XDEV_DEMO_WITH_MPI, and launched by
// mpirun or torchrun: OMPI_COMM_WORLD_SIZE, PMI_SIZE or WORLD_SIZE > 1):
//
//   mpirun -np 2 data_parallel_linear          # 2 processes x 2 host devices: 4 global devices
//
// every process contributes its devices to a GlobalMesh (rank 0's first), generates the same
// global batch and feeds its devices their rows of it; step 4 is a distributed::all_reduce(mean)
// over the GlobalMesh (within the process, then MPI across); the loss is the global mean. Rank 0
// prints the steps, every rank its devices' parameter means (named by global id, "rank 1 /
// HOST:0"), and every rank exits with status 1 unless the loss fell and the means are identical
// on every device of every rank. Host devices per process: XDEV_HOST_DEVICES, else 4 / processes.
#include <xdev/core/trace.hpp>
#include <xdev/spmd/spmd.hpp>
#ifdef XDEV_DEMO_WITH_MPI
#include <xdev/distributed/global_mesh.hpp>
#endif

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace {

using xdev::AnyArray;
using xdev::AnyDevice;
namespace spmd = xdev::spmd;

constexpr std::int64_t inputs = 128;
constexpr std::int64_t features = inputs + 1;  // the inputs and a constant 1, whose weight is the bias
constexpr std::int64_t outputs = 10;
constexpr std::int64_t rows_per_device = 64;
constexpr float learning_rate = 3.0f;

// A fixed-seed generator (splitmix64): the same data on every machine and standard library.
struct SplitMix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f; }
};

struct Options {
  int steps = 40;
  std::size_t devices = 0;  // 0: all
  bool quiet = false;
  std::string trace;  // empty: no trace
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 100000)
        throw std::invalid_argument(arg + " " + argv[i] + ": expected an integer in [1, 100000]");
      return v;
    };
    if (arg == "--steps")
      o.steps = static_cast<int>(value());
    else if (arg == "--devices")
      o.devices = static_cast<std::size_t>(value());
    else if (arg == "--quiet")
      o.quiet = true;
    else if (arg == "--trace") {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') throw std::invalid_argument("--trace needs a file name");
      o.trace = argv[++i];
    } else
      throw std::invalid_argument("unknown argument " + arg +
                                  " (accepted: --steps N, --devices N, --quiet, --trace FILE.json)");
  }
  return o;
}

// One step's data: `rows` examples of a fixed linear teacher plus a little noise.
void make_batch(SplitMix& rng, const std::vector<float>& teacher, std::int64_t rows, std::vector<float>& x,
                std::vector<float>& y) {
  x.assign(static_cast<std::size_t>(rows * features), 0.0f);
  y.assign(static_cast<std::size_t>(rows * outputs), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* xr = &x[static_cast<std::size_t>(r * features)];
    for (std::int64_t i = 0; i < inputs; ++i) xr[i] = rng.uniform();
    xr[inputs] = 1.0f;
    for (std::int64_t o = 0; o < outputs; ++o) {
      float acc = 0.05f * rng.uniform();
      for (std::int64_t i = 0; i < features; ++i) acc += xr[i] * teacher[static_cast<std::size_t>(i * outputs + o)];
      y[static_cast<std::size_t>(r * outputs + o)] = acc;
    }
  }
}

// True when a launcher started this process as one of several.
[[maybe_unused]] bool launched_as_one_of_several() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"})
    if (const char* v = std::getenv(name); v != nullptr && std::atol(v) > 1) return true;
  return false;
}

#ifdef XDEV_DEMO_WITH_MPI
namespace dist = xdev::distributed;
#else
namespace dist {
struct Session;  // never defined: single-process builds always pass nullptr
}
#endif

int train(const Options& opt, [[maybe_unused]] dist::Session* session) {
  std::vector<AnyDevice> devices = xdev::accelerator::devices();
  if (opt.devices != 0) {
    if (opt.devices > devices.size())
      throw std::invalid_argument("--devices " + std::to_string(opt.devices) + ": the backend " +
                                  xdev::accelerator::current_backend() + " has " + std::to_string(devices.size()));
    devices.resize(opt.devices);
  }
  spmd::use_spmd(spmd::Mesh(devices, "data"));
  const spmd::VirtualDevice vd = spmd::virtual_device();
  const spmd::Mesh& mesh = vd.mesh();
  const std::size_t n = mesh.size();  // this process's devices
  // The devices of every process: this one's rows of the global batch start at row `first`.
  std::size_t global_n = n;
  std::int64_t first = 0;
  bool rank0 = true;
#ifdef XDEV_DEMO_WITH_MPI
  std::unique_ptr<dist::GlobalMesh> global;
  if (session != nullptr) {
    global = std::make_unique<dist::GlobalMesh>(*session, mesh);
    global_n = global->size();
    first = rows_per_device * static_cast<std::int64_t>(global->global_index(0));
    rank0 = session->rank() == 0;
  }
#endif
  // The name of local device i: "HOST:0", or its global id "rank 1 / HOST:0" across processes.
  auto label = [&](std::size_t i) {
#ifdef XDEV_DEMO_WITH_MPI
    if (global) return global->device_label(global->global_index(i));
#endif
    return mesh.device(i).name();
  };
  const std::int64_t batch = rows_per_device * static_cast<std::int64_t>(global_n);
  const std::int64_t rows = rows_per_device * static_cast<std::int64_t>(n);  // this process's
#ifdef XDEV_DEMO_WITH_MPI
  if (global && rank0)
    std::cout << "training on " << global->world_size() << " processes, each on its SPMD virtual device, over "
              << *global << ", global batch " << batch << std::endl;
#endif
  if (session == nullptr)
    std::cout << "training on " << xdev::accelerator::current_device() << " (the SPMD virtual device) over " << mesh
              << ", global batch " << batch << '\n';

  SplitMix rng{20261122};
  std::vector<float> teacher(static_cast<std::size_t>(features * outputs));
  for (auto& t : teacher) t = rng.uniform();

  // Parameters: zeros, replicated on every device.
  std::vector<float> w0(static_cast<std::size_t>(features * outputs), 0.0f);
  auto w = spmd::mark_sharding(vd.place(std::span<const float>(w0), {features, outputs}), vd.sharding({})).get();

  // Per-device work arrays.
  std::vector<AnyArray<float>> pred, grad;
  for (const auto& d : mesh.devices()) {
    pred.push_back(xdev::empty<float>(d, {rows_per_device, outputs}));
    grad.push_back(xdev::empty<float>(d, {features, outputs}));
  }

  const auto batch_sharding = vd.sharding({"data", spmd::replicated});
  std::vector<float> hx, hy;
  // Makes the next global batch and starts placing this process's rows of it: mark_sharding
  // returns at once (a future), and the virtual device's copy it reads is handed over to it, so
  // the host buffers can be reused for the batch after.
  struct Placing {
    xdev::Future<spmd::ShardedArray<float>> x, y;
  };
  auto place_next_batch = [&] {
    make_batch(rng, teacher, batch, hx, hy);  // the global batch; this process's rows from `first`
    const auto xs = std::span<const float>(hx).subspan(static_cast<std::size_t>(first * features),
                                                       static_cast<std::size_t>(rows * features));
    const auto ys = std::span<const float>(hy).subspan(static_cast<std::size_t>(first * outputs),
                                                       static_cast<std::size_t>(rows * outputs));
    return Placing{spmd::mark_sharding(vd.place(xs, {rows, features}), batch_sharding),
                   spmd::mark_sharding(vd.place(ys, {rows, outputs}), batch_sharding)};
  };
  float first_loss = 0.0f, loss = 0.0f;
  Placing next = place_next_batch();
  for (int step = 0; step < opt.steps; ++step) {
    auto x = next.x.get();
    auto y = next.y.get();

    std::vector<std::future<float>> losses;
    for (std::size_t i = 0; i < n; ++i) {
      const AnyDevice& dev = mesh.device(i);
      xdev::ops::gemm(dev, x.shard(i), w.shard(i), pred[i]);  // pred = x w
      xdev::ops::axpy(dev, -1.0f, y.shard(i), pred[i]);       // pred = x w - y: the error
      losses.push_back(xdev::ops::dot(dev, pred[i], pred[i]));
      // d(mean squared error)/dw on this device's rows: 2/(rows*outputs) x^T error.
      xdev::ops::gemm(dev, x.shard(i), pred[i], grad[i],
                      {.trans_a = true, .alpha = 2.0f / static_cast<float>(rows_per_device * outputs)});
    }
    // The next step's batch is made and travels while the devices compute this step (its
    // transfers queue behind this step's ops on each device).
    if (step + 1 < opt.steps) next = place_next_batch();
#ifdef XDEV_DEMO_WITH_MPI
    if (global)  // the mean over every device of every process
      dist::all_reduce(*global, std::span<AnyArray<float>>(grad), spmd::ReduceOp::mean).get();
    else
#endif
      spmd::all_reduce(mesh, "data", std::span<AnyArray<float>>(grad), spmd::ReduceOp::mean).get();
    for (std::size_t i = 0; i < n; ++i) xdev::ops::axpy(mesh.device(i), -learning_rate, grad[i], w.shard(i));

    double total = 0.0;
    for (auto& l : losses) total += l.get();
#ifdef XDEV_DEMO_WITH_MPI
    if (session != nullptr) session->all_reduce(std::span(&total, 1), MPI_SUM);  // every process's devices
#endif
    loss = static_cast<float>(total / static_cast<double>(batch * outputs));
    if (step == 0) first_loss = loss;
    if (rank0 && (!opt.quiet || step == 0 || step + 1 == opt.steps)) std::printf("step %3d  loss %.6f\n", step, loss);
  }

  // Every device's parameters: identical, since every device applied the same averaged gradient.
  bool identical = true;
  std::vector<float> means;
  for (std::size_t i = 0; i < n; ++i) {
    const float sum = xdev::ops::sum(mesh.device(i), w.shard(i)).get();
    means.push_back(sum / static_cast<float>(features * outputs));
    std::printf("%s parameter mean %.9g\n", label(i).c_str(), static_cast<double>(means.back()));
    identical = identical && std::memcmp(&means.back(), &means.front(), sizeof(float)) == 0;
  }
  std::string across = std::to_string(n) + " devices";
#ifdef XDEV_DEMO_WITH_MPI
  if (session != nullptr) {
    // Every process's means, as bits: identical on every device of every process?
    std::fflush(stdout);
    const auto all = session->rendezvous("parameter-means", std::as_bytes(std::span(means)));
    for (const auto& bytes : all)
      for (std::size_t at = 0; at + sizeof(float) <= bytes.size(); at += sizeof(float))
        identical = identical && std::memcmp(bytes.data() + at, &means.front(), sizeof(float)) == 0;
    across = std::to_string(global_n) + " devices on " + std::to_string(session->world_size()) + " processes";
  }
#endif
  const bool fell = loss < 0.1f * first_loss;
  if (rank0)
    std::printf("loss %.6f -> %.6f (%s); parameters %s across %s\n", static_cast<double>(first_loss),
                static_cast<double>(loss), fell ? "fell" : "DID NOT FALL", identical ? "identical" : "DIFFER",
                across.c_str());
  std::fflush(stdout);
  return fell && identical ? 0 : 1;
}

}  // namespace

// `train`, recorded into --trace's file when given (one file per rank across processes).
static int traced(const Options& opt, [[maybe_unused]] dist::Session* session) {
  if (opt.trace.empty()) return train(opt, session);
  std::string file = opt.trace;
#ifdef XDEV_DEMO_WITH_MPI
  if (session != nullptr) file = xdev::trace::path_for_rank(file, session->rank());
#endif
  xdev::trace::start(file);
  const int status = train(opt, session);
  if (const auto written = xdev::trace::stop())
    std::cout << "trace written to " << *written << " (open it in https://ui.perfetto.dev)\n";
  return status;
}

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
#ifdef XDEV_DEMO_WITH_MPI
  if (launched_as_one_of_several()) {
    dist::Session session = dist::init();  // before any device is used
    // The default: 4 host devices in all (2 per process with -np 2), at least one each.
    const std::uint32_t per = session.world_size() < 4 ? 4 / session.world_size() : 1;
    ::setenv("XDEV_HOST_DEVICES", std::to_string(per).c_str(), /*overwrite=*/0);
    int status = 2;
    try {
      status = traced(opt, &session);
    } catch (const std::exception& e) {
      // Report, then end the whole job: the other processes would wait for this one.
      std::cerr << "data_parallel_linear: rank " << session.rank() << ": " << e.what() << std::endl;
      session.abort(2, "data_parallel_linear failed");
    }
    return status;
  }
#endif
  ::setenv("XDEV_HOST_DEVICES", "4", /*overwrite=*/0);  // the default mesh: 4 host devices
  return traced(opt, nullptr);
} catch (const std::exception& e) {
  std::cerr << "data_parallel_linear: " << e.what() << '\n';
  return 2;
}
