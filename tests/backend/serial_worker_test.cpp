// xdev::SerialWorker: posted jobs run one after another, in order, on one thread of their own;
// destroying the worker runs the jobs already posted.
#include <xdev/backend/serial_worker.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace {

TEST(SerialWorker, RunsJobsInPostingOrderOnOneOtherThread) {
  xdev::SerialWorker w;
  std::vector<int> order;
  std::set<std::thread::id> threads;
  std::promise<void> done;
  for (int i = 0; i < 100; ++i)
    w.post([&, i] {
      order.push_back(i);  // only the worker's thread touches these
      threads.insert(std::this_thread::get_id());
    });
  w.post([&] { done.set_value(); });
  done.get_future().get();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
}

TEST(SerialWorker, DestructionRunsTheJobsAlreadyPostedFromAnyThread) {
  std::atomic<int> ran{0};
  {
    xdev::SerialWorker w;
    std::vector<std::thread> posters;
    for (int t = 0; t < 4; ++t)
      posters.emplace_back([&] {
        for (int i = 0; i < 50; ++i) w.post([&] { ran.fetch_add(1); });
      });
    for (auto& p : posters) p.join();
  }
  EXPECT_EQ(ran.load(), 200);
}

}  // namespace
