// expect: B::memory_handle must be trivially copyable and at most 8 bytes
// Mistake: a plugin's memory handle does not fit the ABI's 64-bit xdev_memory.
#include "complete_backend.hpp"

#include <xdev/plugin/define.hpp>

#include <cstdint>

struct PointerAndOffset {
  void* base;
  std::uint64_t offset;
  bool operator==(const PointerAndOffset&) const = default;
};

using Wide = CompleteBackend<xdev::Capabilities<>, PointerAndOffset>;

XDEV_DEFINE_PLUGIN(Wide);
