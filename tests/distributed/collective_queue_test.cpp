// The distributed session's collectives thread (<xdev/distributed/detail/collective_queue.hpp>):
// jobs run one at a time in the order posted, and a job left to its waiter runs on the waiting
// thread. No MPI: the queue is plain threads. The reservations here are long (minutes) wherever a
// test needs to know which thread runs a job, so that no scheduling delay decides it.
#include <xdev/distributed/detail/collective_queue.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using xdev::distributed::detail::CollectiveQueue;
using namespace std::chrono_literals;

constexpr auto forever = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::hours(1));

std::shared_ptr<CollectiveQueue> make_queue(std::chrono::microseconds reservation) {
  return std::make_shared<CollectiveQueue>(std::chrono::microseconds(100), reservation);
}

TEST(CollectiveQueue, AJobLeftToItsWaiterRunsOnTheWaitingThread) {
  auto q = make_queue(forever);
  std::thread::id ran_on;
  auto help = q->post_awaited([&] { ran_on = std::this_thread::get_id(); });
  help();  // under the old hand-off, the job would wait out the hour on the collectives thread
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(CollectiveQueue, AWaiterRunsTheJobsPostedBeforeItsOwnInOrderAndNoneAfter) {
  auto q = make_queue(forever);
  std::vector<int> order;  // written by the jobs, which run one at a time, on this thread here
  auto first = q->post_awaited([&] { order.push_back(1); });
  auto second = q->post_awaited([&] { order.push_back(2); });
  auto third = q->post_awaited([&] { order.push_back(3); });
  second();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  first();  // already run: nothing to do
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  third();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(CollectiveQueue, AReservationNobodyWaitsForEndsAndTheThreadRunsTheJob) {
  auto q = make_queue(std::chrono::microseconds(1000));
  std::promise<std::thread::id> ran_on;
  (void)q->post_awaited([&] { ran_on.set_value(std::this_thread::get_id()); });
  auto f = ran_on.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
}

// While the waiters run every job themselves, the thread dozes longer each time (0.5 ms doubling
// up to 8 ms here): about 25 wake-ups in 200 ms, where dozes of 0.5 ms each would be about 400.
// A loaded machine only wakes it later, so fewer.
TEST(CollectiveQueue, TheThreadDozesLongerWhileWaitersRunEveryJob) {
  const auto hour = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::hours(1));
  // A reservation of 1 ms: a thread that wakes between a post and its help waits that long at most.
  auto q = std::make_shared<CollectiveQueue>(std::chrono::microseconds(100), std::chrono::microseconds(1000),
                                             std::chrono::microseconds(500), hour, std::chrono::microseconds(8000));
  int ran = 0;
  const auto end = std::chrono::steady_clock::now() + 200ms;
  while (std::chrono::steady_clock::now() < end) {
    auto help = q->post_awaited([&] { ++ran; });
    help();
  }
  EXPECT_GT(ran, 0);
  EXPECT_LT(q->wakeups(), 100u) << "the thread woke up " << q->wakeups() << " times in 200 ms for " << ran
                                << " jobs that their waiters ran";
}

// A job that nobody took within its reservation, while the thread dozes (for an hour here), is
// started when the next job is posted: the post wakes the thread for it.
TEST(CollectiveQueue, AJobLeftPastItsReservationIsStartedWhenTheNextOneIsPosted) {
  const auto hour = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::hours(1));
  auto q = std::make_shared<CollectiveQueue>(std::chrono::microseconds(100), std::chrono::microseconds(1000), hour,
                                             hour, hour);
  auto first = q->post_awaited([] {});
  first();                            // a post for a waiter: the thread dozes from now on
  std::this_thread::sleep_for(20ms);  // and is in its hour-long doze
  std::promise<std::thread::id> ran_on;
  (void)q->post_awaited([&] { ran_on.set_value(std::this_thread::get_id()); });
  std::this_thread::sleep_for(20ms);  // its reservation has passed; nobody waits for it
  (void)q->post_awaited([] {});       // wakes the thread for the one left behind
  auto f = ran_on.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready) << "the job left past its reservation did not start";
  EXPECT_NE(f.get(), std::this_thread::get_id());
}

// A job that asks to be started within 1 ms of its reservation's end, posted while the thread is
// in a doze that would end an hour later, wakes the thread: nobody waits for it, and it starts.
TEST(CollectiveQueue, AJobThatAsksToStartSoonWakesADozingThread) {
  const auto hour = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::hours(1));
  auto q = std::make_shared<CollectiveQueue>(std::chrono::microseconds(100), std::chrono::microseconds(1000), hour,
                                             hour, hour);
  for (int i = 0; i < 3; ++i) {
    auto help = q->post_awaited([] {});  // posts for waiters, which run them: the thread dozes
    help();
  }
  std::this_thread::sleep_for(20ms);  // and is in its hour-long doze
  std::promise<std::thread::id> ran_on;
  (void)q->post_awaited([&] { ran_on.set_value(std::this_thread::get_id()); }, std::chrono::microseconds(1000));
  auto f = ran_on.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready) << "the job held past its reservation did not start";
  EXPECT_NE(f.get(), std::this_thread::get_id());
}

// After such a post, the thread's dozes are no longer than the job asked for (5 ms here), so
// that the next jobs that ask the same are started in time without a wake-up each: 200 ms of
// jobs that their waiters run see about 45 wake-ups (dozes of 0.5, 1, 2, 4 ms, then 5 ms each).
// Dozes that kept doubling would leave each post to wake the thread (about 400 wake-ups in 200
// ms on an idle 2-core machine); a loaded machine wakes it later, so fewer.
TEST(CollectiveQueue, TheThreadDozesNoLongerThanTheLatestPostAsks) {
  const auto hour = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::hours(1));
  auto q = std::make_shared<CollectiveQueue>(std::chrono::microseconds(100), std::chrono::microseconds(1000),
                                             std::chrono::microseconds(500), hour, hour);
  const auto end = std::chrono::steady_clock::now() + 200ms;
  std::uint64_t posts = 0;
  while (std::chrono::steady_clock::now() < end) {
    auto help = q->post_awaited([] {}, std::chrono::microseconds(5000));
    help();
    ++posts;
  }
  EXPECT_GE(q->wakeups(), 10u) << "the thread woke up " << q->wakeups() << " times in 200 ms of dozes capped at 5 ms";
  EXPECT_LE(q->wakeups(), 100u) << posts << " posts woke the thread " << q->wakeups() << " times in 200 ms";
}

TEST(CollectiveQueue, AJobPostedWithoutAWaiterRunsOnTheThreadAtOnce) {
  auto q = make_queue(forever);
  std::promise<std::thread::id> ran_on;
  q->post([&] { ran_on.set_value(std::this_thread::get_id()); });
  auto f = ran_on.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
}

TEST(CollectiveQueue, AWaiterWaitsOutAJobRunningElsewhereThenRunsItsOwn) {
  auto q = make_queue(forever);
  std::promise<void> started;
  std::promise<void> release;
  std::atomic<bool> first_done{false};
  q->post([&] {
    started.set_value();
    release.get_future().wait();
    first_done = true;
  });
  started.get_future().wait();  // the first job runs on the collectives thread now
  std::thread::id ran_on;
  bool first_was_done = false;
  auto help = q->post_awaited([&] {
    ran_on = std::this_thread::get_id();
    first_was_done = first_done;
  });
  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    release.set_value();
  });
  help();  // waits for the first job, then runs its own here
  releaser.join();
  EXPECT_TRUE(first_was_done);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(CollectiveQueue, AWaiterWhoseJobStartedElsewhereReturnsWithoutWaitingForIt) {
  auto q = make_queue(std::chrono::microseconds(0));  // no reservation: the thread takes it
  std::promise<void> started;
  std::promise<void> release;
  auto help = q->post_awaited([&] {
    started.set_value();
    release.get_future().wait();
  });
  started.get_future().wait();
  help();  // must not wait for the running job (its future does that), nor run anything
  release.set_value();
  q->close();  // before the promises the job uses go
}

TEST(CollectiveQueue, AJobThatWaitsForALaterOneDoesNotRunItNorDeadlock) {
  auto q = make_queue(forever);
  std::vector<int> order;
  xdev::detail::wait_helper later;
  auto first = q->post_awaited([&] {
    later();  // inside a job of this queue: returns at once (the later job cannot run inside it)
    order.push_back(1);
  });
  later = q->post_awaited([&] { order.push_back(2); });
  first();
  EXPECT_EQ(order, (std::vector<int>{1}));
  later();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(CollectiveQueue, CloseRunsWhatIsLeftToWaitersAtOnce) {
  auto q = make_queue(forever);
  int ran = 0;
  (void)q->post_awaited([&] { ++ran; });
  (void)q->post_awaited([&] { ++ran; });
  const auto t0 = std::chrono::steady_clock::now();
  q->close();  // would wait out the hour without ending the reservations
  EXPECT_EQ(ran, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 60s);
}

// close() waits for a job a waiter runs; the thread, asleep meanwhile (no doze: `linger` 0), must
// learn that the job ended, or close() never returns.
TEST(CollectiveQueue, CloseWaitsForAJobAWaiterRunsAndThenReturns) {
  auto q = std::make_shared<CollectiveQueue>(std::chrono::microseconds(100), forever, std::chrono::microseconds(500),
                                             std::chrono::microseconds(0));
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto help = q->post_awaited([&] {
    started.set_value();
    released.wait();
  });
  std::thread waiter([&] { help(); });
  started.get_future().wait();
  std::promise<void> closed;
  std::thread closer([&] {
    q->close();
    closed.set_value();
  });
  std::this_thread::sleep_for(20ms);  // close() has woken the thread, which found the job running
  release.set_value();
  auto done = closed.get_future();
  const bool returned = done.wait_for(60s) == std::future_status::ready;
  EXPECT_TRUE(returned) << "close() did not return after the waiter's job ended";
  waiter.join();
  if (returned) {
    closer.join();
  } else {
    closer.detach();  // hung: the process ends with the test run
  }
}

TEST(CollectiveQueue, AHelperOfAQueueThatIsGoneDoesNothing) {
  int ran = 0;
  xdev::detail::wait_helper help;
  {
    auto q = make_queue(forever);
    help = q->post_awaited([&] { ++ran; });
  }  // destroying the queue runs the job
  EXPECT_EQ(ran, 1);
  help();
  EXPECT_EQ(ran, 1);
}

// Several threads post (some jobs awaited, some not) and wait for their own; every job runs once,
// one at a time, in the order of the posts.
TEST(CollectiveQueue, JobsFromSeveralThreadsRunOnceEachOneAtATimeInTheOrderPosted) {
  auto q = make_queue(std::chrono::microseconds(20));
  constexpr int threads = 4;
  constexpr int per_thread = 400;
  std::mutex post_order;  // makes the order of posts observable: tickets are taken under it
  std::vector<int> posted;
  std::vector<int> ran;  // written by the jobs only, which must run one at a time
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const int id = t * per_thread + i;
        auto job = [&, id] {
          if (running.fetch_add(1) != 0) overlapped = true;
          ran.push_back(id);
          running.fetch_sub(1);
        };
        if (i % 3 == 0) {
          std::lock_guard lk(post_order);
          posted.push_back(id);
          q->post(job);
          continue;
        }
        xdev::detail::wait_helper help;
        {
          std::lock_guard lk(post_order);
          posted.push_back(id);
          help = q->post_awaited(job);
        }
        if (i % 3 == 1) help();  // the others are left to the thread when the reservation ends
      }
    });
  for (auto& th : pool) th.join();
  q->close();
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(ran, posted);
}

}  // namespace
