// The collective algorithms the SPMD tests loop over, and their names for failure messages.
#pragma once

#include <xdev/spmd/collective_options.hpp>

namespace xdev_test {

using xdev::spmd::CollectiveAlgorithm;

inline constexpr CollectiveAlgorithm every_algorithm[] = {CollectiveAlgorithm::automatic, CollectiveAlgorithm::ring,
                                                          CollectiveAlgorithm::direct,
                                                          CollectiveAlgorithm::shared_memory};
// Where memory is not host memory shared_memory is refused; these run there.
inline constexpr CollectiveAlgorithm copy_algorithms[] = {CollectiveAlgorithm::automatic, CollectiveAlgorithm::ring,
                                                          CollectiveAlgorithm::direct};

inline const char* name_of(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::ring:
      return "ring";
    case CollectiveAlgorithm::direct:
      return "direct";
    case CollectiveAlgorithm::shared_memory:
      return "shared_memory";
    case CollectiveAlgorithm::automatic:
      break;
  }
  return "automatic";
}

}  // namespace xdev_test
