/// \file
/// The CUDA plugin's environment variables, parsed without CUDA (so that the fuzz harness of
/// tests/fuzz/ can feed them): `XDEV_CUDA_COMPLETION`.
#pragma once

#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>

#include <string>
#include <string_view>

namespace xdev_cuda {

/// How completions reach xdev (`XDEV_CUDA_COMPLETION`).
enum class CompletionMode { poll, host_func };

namespace detail {

/// Parses a value of `XDEV_CUDA_COMPLETION`: "poll" or "host_func", exactly.
/// \throws xdev::error `errc::invalid_argument` naming the variable and what it accepts.
inline CompletionMode parse_completion_mode(std::string_view text) {
  if (text == "poll") return CompletionMode::poll;
  if (text == "host_func") return CompletionMode::host_func;
  throw xdev::error(xdev::errc::invalid_argument,
                    "XDEV_CUDA_COMPLETION=\"" + std::string(text) + "\" is not accepted; accepted: poll, host_func");
}

/// `XDEV_CUDA_COMPLETION` as set in the environment; unset: poll.
inline CompletionMode completion_mode_from_environment() {
  const auto text = xdev::getenv_string("XDEV_CUDA_COMPLETION");
  return text ? parse_completion_mode(*text) : CompletionMode::poll;
}

}  // namespace detail
}  // namespace xdev_cuda
