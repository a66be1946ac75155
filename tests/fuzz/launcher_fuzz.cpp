// The launcher's variables as xdev::distributed::read_environment reads them (RANK, WORLD_SIZE,
// OMPI_COMM_WORLD_*, PMI_*): input lines are NAME=VALUE. Any set of values is a placement or an
// invalid_argument naming the variables; a placement it returns is consistent.
#include <xdev/distributed/environment.hpp>

#include "fuzz_support.hpp"

#include <map>
#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, std::string, std::less<>> variables;
  auto text = xdev_fuzz::text_of(data, size);
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    const auto equals = line.find('=');
    if (equals == std::string_view::npos) continue;
    // As in a real environment: a value ends at its first NUL.
    const auto value = line.substr(equals + 1);
    variables[std::string(line.substr(0, equals))] = std::string(value.substr(0, value.find('\0')));
  }
  const xdev::distributed::EnvLookup lookup = [&](const char* name) -> std::optional<std::string> {
    const auto it = variables.find(std::string_view(name));
    if (it == variables.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  xdev_fuzz::only_errors({xdev::errc::invalid_argument}, [&] {
    const auto placement = xdev::distributed::read_environment(lookup);
    if (placement.rank && placement.world_size) XDEV_FUZZ_CHECK(placement.rank->value < placement.world_size->value);
    if (placement.local_rank && placement.local_world_size)
      XDEV_FUZZ_CHECK(placement.local_rank->value < placement.local_world_size->value);
    if (placement.local_world_size && placement.world_size)
      XDEV_FUZZ_CHECK(placement.local_world_size->value <= placement.world_size->value);
  });
  return 0;
}
