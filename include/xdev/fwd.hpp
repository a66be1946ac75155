/// \file
/// Forward declarations of xdev's handles and policy tags, for code that names them without
/// needing their definitions (plugin and ABI code, headers of downstream libraries).
#pragma once

#include <cstddef>
#include <cstdint>

namespace xdev {

enum class DType : std::uint8_t;
enum class RngAlgorithm : std::uint8_t;
enum class AutocastKey : std::uint8_t;
enum class CollectiveKind : std::uint8_t;
enum class errc : int;
class error;
class Shape;
struct f16;
struct bf16;
struct CapabilitySet;

template <class... Policies>
struct Capabilities;
template <std::size_t Factor>
struct DenseGather;
template <RngAlgorithm A>
struct RngDefault;
template <AutocastKey Key, DType D>
struct Autocast;
template <std::size_t N>
struct MaxInflight;
template <DType... Ds>
struct SupportedDTypes;
template <std::size_t Bytes>
struct MemoryPerDevice;
template <CollectiveKind K>
struct CollectiveBackend;
template <int P>
struct Priority;

template <class Backend>
class Runtime;
template <class Backend>
class Device;
template <class T, class Backend>
class Buffer;
template <class T, class Backend>
class ArrayView;
template <class Backend>
class Stream;
class Event;
class AnyDevice;
class AnyStream;

namespace backends {
class Host;
}  // namespace backends

}  // namespace xdev
