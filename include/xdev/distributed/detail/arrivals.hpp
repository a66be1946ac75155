/// \file
/// Who entered which call: the kinds of a distributed session's calls, the header of a call's
/// terms (which also announces a call that checks its terms first), and, per peer, the calls it is
/// known to have entered. What the deadline engine (<xdev/distributed/detail/deadline_engine.hpp>)
/// names when a call misses its deadline. No MPI here. Not part of the public API.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

namespace xdev::distributed::detail {

// What a session call is, as its arrival token says (the tokens' send buffers: static storage,
// since the sends are never waited for).
enum class Kind : int {
  init = 0,
  barrier = 1,
  rendezvous = 2,
  broadcast_master_param = 3,
  finalize = 4,
  all_reduce = 5,
  all_gather = 6,
  reduce_scatter = 7,
  broadcast = 8,
  reduce = 9,
  collective_permute = 10,
  all_to_all = 11
};
inline constexpr int kind_codes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
inline constexpr const char* kind_names[] = {"init",      "barrier",    "rendezvous",         "broadcast_master_param",
                                             "finalize",  "all_reduce", "all_gather",         "reduce_scatter",
                                             "broadcast", "reduce",     "collective_permute", "all_to_all"};
static_assert(std::size(kind_codes) == std::size(kind_names), "a name and a token for every Kind");
inline const char* name_of(int kind) {
  return kind >= 0 && kind < static_cast<int>(std::size(kind_names)) ? kind_names[kind] : "an unknown call";
}
// Whether a call of `kind` tells the other ranks it has begun with the header of its terms (see
// `DeadlineEngine::headers_locked`), which every call of that kind exchanges first thing, rather
// than with an arrival token of its own: the header says the same, and the call then sends one
// message to each peer instead of two.
constexpr bool announced_by_header(int kind) {
  switch (static_cast<Kind>(kind)) {
    case Kind::all_reduce:
    case Kind::all_gather:
    case Kind::reduce_scatter:
    case Kind::broadcast:
    case Kind::reduce:
    case Kind::collective_permute:
    case Kind::all_to_all:
      return true;
    default:
      return false;
  }
}

inline std::string list_ranks(const std::vector<std::uint32_t>& ranks) {
  std::string out;
  for (std::uint32_t r : ranks) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r);
  }
  return out;
}

/// What each rank passed to a collective: two counts and a description (sizes, shapes, op); and
/// which call it is (its number and kind: for a call `announced_by_header`, its arrival).
struct CallHeader {
  std::uint64_t count[2];
  std::uint64_t seq;
  std::int32_t kind;
  char description[108];
};

/// Per peer, the calls it is known to have entered: its arrival tokens and the headers that
/// announced its calls, counted as they come in, whichever order they are taken in. Every rank
/// numbers its calls alike, so a peer whose count is below a call's number never entered it.
class Arrivals {
 public:
  void reset(std::uint32_t world_size) {
    count_.assign(world_size, 0);
    token_kind_.assign(world_size, -1);
    header_seq_.assign(world_size, 0);
    header_kind_.assign(world_size, -1);
  }
  /// `peer`'s arrival token for a call of `kind`.
  void token(std::uint32_t peer, int kind) {
    ++count_[peer];
    token_kind_[peer] = kind;
  }
  /// `peer`'s header `h`: an arrival when its call is `announced_by_header` (else the call sent a
  /// token too, counted by `token`).
  void header(std::uint32_t peer, const CallHeader& h) {
    if (!announced_by_header(h.kind)) return;
    ++count_[peer];
    header_seq_[peer] = h.seq;
    header_kind_[peer] = h.kind;
  }
  [[nodiscard]] std::uint64_t count(std::uint32_t peer) const { return count_[peer]; }

  /// Why call number `seq` (of `kind`) on `rank` did not complete, as far as the arrivals tell:
  /// the peers that never entered it, else those that entered another call and which, else that
  /// every rank arrived.
  [[nodiscard]] std::string verdict(std::uint32_t rank, std::uint64_t seq, int kind) const {
    std::vector<std::uint32_t> missing;
    std::string elsewhere;
    for (std::uint32_t p = 0; p < count_.size(); ++p) {
      if (p == rank) continue;
      // The peer's latest call known here: its header's when that is the latest, else its token's.
      const int latest = header_seq_[p] == count_[p] ? header_kind_[p] : token_kind_[p];
      if (count_[p] < seq)
        missing.push_back(p);
      else if (count_[p] == seq && latest != kind)
        elsewhere +=
            std::string(elsewhere.empty() ? "" : ", ") + "rank " + std::to_string(p) + " called " + name_of(latest);
    }
    const std::string world = std::to_string(count_.size());
    if (!missing.empty())
      return (missing.size() == 1 ? "rank " : "ranks ") + list_ranks(missing) + " of " + world +
             (missing.size() == 1 ? " has" : " have") + " not arrived";
    if (!elsewhere.empty()) return "every rank arrived, but not at the same call: " + elsewhere;
    return "every rank arrived, but the MPI operation did not complete";
  }

 private:
  std::vector<std::uint64_t> count_;       // calls known here (tokens and announcing headers)
  std::vector<int> token_kind_;            // the kind of the last token
  std::vector<std::uint64_t> header_seq_;  // the number of the last call announced by header
  std::vector<int> header_kind_;           // and that call's kind
};

}  // namespace xdev::distributed::detail
