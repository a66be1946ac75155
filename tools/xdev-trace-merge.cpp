// xdev-trace-merge -o OUT RANK_FILE...
//
// Joins the per-rank trace files of a job of several processes (XDEV_TRACE under mpirun writes
// one per rank: step.rank0.json, step.rank1.json, ...) into one trace that Perfetto opens with
// every rank's tracks. Each rank's times are shifted so that the end of the session's first
// meeting of every rank (`distributed::init`) falls at one instant in every rank; flow ids are
// made unique per rank (rank * 2^32 + id). The output is written to a temporary file and renamed.
//
// Exit status: 0 merged; 1 a file is missing, not JSON, not a rank's xdev trace, or two files
// are the same rank; 2 a usage error.
#include <boost/json.hpp>
#include <boost/json/src.hpp>  // Boost.JSON, header-only: in this file only

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace json = boost::json;

struct RankTrace {
  std::string file;
  std::int64_t rank = 0, world_size = 0;
  double rendezvous_us = 0;
  json::array events;
};

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what);
}

RankTrace read_rank(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, std::string("cannot open: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  json::value doc = json::parse(text.str(), ec);
  if (ec) fail(file, "not JSON (" + ec.message() + ")");
  auto* root = doc.if_object();
  auto* events = root ? root->if_contains("traceEvents") : nullptr;
  if (events == nullptr || !events->is_array()) fail(file, "not a trace (no traceEvents array)");
  const auto* xdev = root->if_contains("xdev");
  const auto* place = xdev ? xdev->if_object() : nullptr;
  auto integer = [&](const char* key) -> const json::value* {
    const auto* v = place ? place->if_contains(key) : nullptr;
    return v && v->is_int64() ? v : nullptr;
  };
  const auto* rendezvous = place ? place->if_contains("rendezvous_us") : nullptr;
  if (!integer("rank") || !integer("world_size") || rendezvous == nullptr || !rendezvous->is_number())
    fail(file,
         "not the trace of one rank of a job (no xdev.rank, xdev.world_size and xdev.rendezvous_us: it was not "
         "recorded in a process that ran distributed::init with more than one rank)");
  RankTrace r;
  r.file = file;
  r.rank = integer("rank")->as_int64();
  r.world_size = integer("world_size")->as_int64();
  r.rendezvous_us = rendezvous->to_number<double>();
  r.events = std::move(events->as_array());
  return r;
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  if (f == nullptr) fail(path, std::string("cannot create ") + temp + ": " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    fail(path, "cannot write " + temp + ": " + why);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    fail(path, "cannot rename " + temp + " to it: " + why);
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: xdev-trace-merge -o OUT RANK_FILE...\n"
               "  joins the per-rank traces of a job (XDEV_TRACE=step.json under mpirun writes step.rank0.json,\n"
               "  step.rank1.json, ...) into OUT, with the ranks' clocks aligned at distributed::init\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string out;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-o" || a == "--output") {
      if (i + 1 >= argc) return usage();
      out = argv[++i];
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "xdev-trace-merge: unknown option %s\n", a.c_str());
      return usage();
    } else {
      inputs.push_back(a);
    }
  }
  if (out.empty() || inputs.empty()) return usage();

  std::vector<RankTrace> ranks;
  std::map<std::int64_t, std::string> seen;
  for (const auto& file : inputs) {
    RankTrace r = read_rank(file);
    if (const auto it = seen.find(r.rank); it != seen.end())
      fail(file, "rank " + std::to_string(r.rank) + " again (" + it->second + " is that rank too)");
    if (!ranks.empty() && r.world_size != ranks.front().world_size)
      fail(file, "a job of " + std::to_string(r.world_size) + " ranks, but " + ranks.front().file + " is one of " +
                     std::to_string(ranks.front().world_size));
    seen.emplace(r.rank, file);
    ranks.push_back(std::move(r));
  }
  std::sort(ranks.begin(), ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });

  // The meeting's end becomes the latest of the ranks' own times for it, so no time goes negative.
  double meeting = ranks.front().rendezvous_us;
  for (const auto& r : ranks) meeting = std::max(meeting, r.rendezvous_us);
  json::array merged;
  for (auto& r : ranks) {
    const double shift = meeting - r.rendezvous_us;
    for (auto& v : r.events) {
      auto* e = v.if_object();
      if (e == nullptr) fail(r.file, "an event that is not an object");
      const auto* ph = e->if_contains("ph");
      const bool metadata = ph && ph->is_string() && ph->as_string() == "M";
      if (auto* ts = e->if_contains("ts"); ts && ts->is_number() && !metadata) *ts = ts->to_number<double>() + shift;
      if (auto* id = e->if_contains("id"); id && id->is_number())  // flows: unique across ranks
        *id = (r.rank << 32) + id->to_number<std::int64_t>();
      merged.push_back(std::move(v));
    }
  }
  json::array rank_list;
  for (const auto& r : ranks) rank_list.push_back(r.rank);
  json::object doc;
  doc["displayTimeUnit"] = "ms";
  doc["xdev"] = json::object{{"merged_ranks", rank_list}, {"world_size", ranks.front().world_size}};
  const std::size_t count = merged.size();
  doc["traceEvents"] = std::move(merged);
  write_atomically(out, json::serialize(doc) + "\n");

  std::printf("merged %zu ranks of %lld (%zu events) into %s; clocks aligned at distributed::init\n", ranks.size(),
              static_cast<long long>(ranks.front().world_size), count, out.c_str());
  if (static_cast<std::int64_t>(ranks.size()) != ranks.front().world_size)
    std::fprintf(stderr, "xdev-trace-merge: note: only %zu of the job's %lld ranks were given\n", ranks.size(),
                 static_cast<long long>(ranks.front().world_size));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "xdev-trace-merge: %s\n", e.what());
  return 1;
}
