/// \file
/// `detail::NodeCache`: the nodes of entries erased from a node-based map (`std::map`,
/// `std::multimap`), kept to hold the next entries, so that a map whose entries come and go at a
/// steady rate (a device allocator's cached blocks, the deadline timer's entries) stops allocating.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace xdev::detail {

/// Up to `Capacity` spare nodes of `Map`. Not thread-safe: its owner guards it with the map.
template <class Map, std::size_t Capacity = 64>
class NodeCache {
 public:
  using iterator = typename Map::iterator;

  /// \throws std::bad_alloc when the spare list's room cannot be reserved.
  NodeCache() { spare_.reserve(Capacity); }

  /// Inserts `(key, value)` into `map`, in a kept node when there is one (no allocation then).
  /// \throws what `Map::emplace` throws, only when no node is kept.
  iterator insert(Map& map, typename Map::key_type key, typename Map::mapped_type value) {
    if (spare_.empty()) return position(map.emplace(std::move(key), std::move(value)));
    typename Map::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = std::move(key);
    node.mapped() = std::move(value);
    return position(map.insert(std::move(node)));
  }

  /// Erases `it` from `map` and keeps its node while there is room (its value stays in it until
  /// the node is reused: move out what must not linger first).
  void erase(Map& map, iterator it) noexcept {
    typename Map::node_type node = map.extract(it);
    if (spare_.size() < Capacity) spare_.push_back(std::move(node));  // within the reserve: no throw
  }

  /// How many nodes are kept.
  [[nodiscard]] std::size_t size() const noexcept { return spare_.size(); }

 private:
  // Where an insertion put its entry: `map` returns a pair or an insert_return_type, `multimap` an
  // iterator.
  static iterator position(iterator it) noexcept { return it; }
  static iterator position(std::pair<iterator, bool> r) noexcept { return r.first; }
  template <class R>
  static iterator position(R&& r) noexcept requires requires {
    r.position;
  }
  { return r.position; }

  std::vector<typename Map::node_type> spare_;
};

}  // namespace xdev::detail
