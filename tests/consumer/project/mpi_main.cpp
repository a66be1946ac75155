// A downstream program of the MPI component (find_package(xdev CONFIG REQUIRED COMPONENTS mpi),
// target xdev::mpi): a singleton run (no launcher) is rank 0 of 1, and its collectives work.
#include <xdev/distributed/axis_collectives.hpp>
#include <xdev/distributed/global_mesh.hpp>
#include <xdev/distributed/mpi.hpp>

#include <cstddef>
#include <cstdio>
#include <span>
#include <vector>

int main() {
  xdev::distributed::Session session = xdev::distributed::init();
  session.barrier();
  const std::byte hello[] = {std::byte{42}};
  const auto all = xdev::distributed::rendezvous("consumer", hello);
  std::vector<int> param{1, 2, 3};
  xdev::distributed::broadcast_master_param(std::span(param));
  const bool ok = session.rank() == 0 && session.world_size() == 1 && all.size() == 1 && all[0].size() == 1 &&
                  all[0][0] == std::byte{42} && param[2] == 3;
  std::printf("consumer_mpi: rank %u of %u: %s\n", session.rank(), session.world_size(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
