/// \file
/// Internal: which threads may unload a plugin library (see <xdev/plugin/detail/parked_images.hpp>).
#pragma once

namespace xdev::plugin::detail {

/// True on a thread of xdev's own that must never unload a plugin library itself (the reaper's,
/// <xdev/any/detail/reaper.hpp>): such a thread may still be at work while the process exits, and
/// a `dlclose` there can unmap a plugin under the exiting thread. A `Library` whose last reference
/// goes away on such a thread parks its image instead (`parked_images`).
inline thread_local bool unloads_parked_here = false;

}  // namespace xdev::plugin::detail
