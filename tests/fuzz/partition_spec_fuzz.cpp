// PartitionSpec::parse: any text is a spec or an invalid_argument naming the problem; a spec
// prints as text that parses back to the same spec.
#include <xdev/spmd/partition_spec.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  xdev_fuzz::only_errors({xdev::errc::invalid_argument}, [&] {
    const auto spec = xdev::spmd::PartitionSpec::parse(xdev_fuzz::text_of(data, size));
    const std::string printed = spec.to_string();
    XDEV_FUZZ_CHECK(xdev::spmd::PartitionSpec::parse(printed) == spec);
    XDEV_FUZZ_CHECK(xdev::spmd::PartitionSpec::parse(printed).to_string() == printed);
  });
  return 0;
}
