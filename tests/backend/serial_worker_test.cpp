// xdev::SerialWorker: posted jobs run one after another, in order, on one thread of their own;
// destroying the worker runs the jobs already posted.
#include <xdev/backend/serial_worker.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

// A worker with a spin budget takes jobs posted while it looks for work, and one posted after it
// has given up and gone to sleep: the post must still wake it.
TEST(SerialWorker, WithASpinBudgetRunsJobsPostedWhileSpinningAndAfterItSleeps) {
  xdev::SerialWorker w(std::chrono::microseconds(200));
  std::vector<int> order;
  for (int round = 0; round < 3; ++round) {
    std::promise<void> done;
    for (int i = 0; i < 10; ++i) w.post([&order, i] { order.push_back(i); });
    w.post([&] { done.set_value(); });
    done.get_future().get();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // far past the budget: it sleeps
  }
  ASSERT_EQ(order.size(), 30u);
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i % 10));
}

// Destruction ends a spin at once: with a budget of an hour, the destructor must not wait it out
// (were it to, this test would hang until CTest's timeout fails it).
TEST(SerialWorker, DestructionEndsASpinAndRunsWhatWasPosted) {
  std::atomic<int> ran{0};
  {
    xdev::SerialWorker w(std::chrono::hours(1));
    std::promise<void> first;
    w.post([&] {
      ran.fetch_add(1);
      first.set_value();
    });
    first.get_future().get();  // the worker now spins for the next job
    w.post([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 2);
  {
    xdev::SerialWorker idle(std::chrono::hours(1));  // spins from the start, never given a job
  }
}

}  // namespace
