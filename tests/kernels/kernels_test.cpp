#include <xdev/kernels/convert.hpp>
#include <xdev/kernels/elementwise.hpp>
#include <xdev/kernels/gather.hpp>
#include <xdev/kernels/gemm.hpp>
#include <xdev/kernels/parallel.hpp>
#include <xdev/kernels/reduce.hpp>
#include <xdev/kernels/rng_fill.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

namespace host = xdev::kernels;
using host::Parallel;
using xdev::bf16;
using xdev::DType;
using xdev::f16;

// A pool and its Parallel, destroyed (joined) with the test.
struct Pool {
  explicit Pool(std::size_t n) : pool(n), par{&pool, n} {}
  boost::asio::thread_pool pool;
  Parallel par;
};

const Parallel serial{};

// An owning array of T with data() for every T (std::vector<bool> has none).
template <class T>
class Buf {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  Buf() = default;
  explicit Buf(std::size_t n, T fill = T{}) : n_(n), p_(new T[n]) { std::fill_n(p_.get(), n, fill); }
  Buf(std::initializer_list<T> l) : Buf(l.size()) { std::copy(l.begin(), l.end(), p_.get()); }
  Buf(const Buf& o) : Buf(o.n_) { std::copy_n(o.p_.get(), n_, p_.get()); }
  Buf(Buf&&) noexcept = default;
  Buf& operator=(Buf o) noexcept {
    n_ = o.n_;
    p_ = std::move(o.p_);
    return *this;
  }
  ~Buf() = default;
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  std::size_t size() const { return n_; }
  T& operator[](std::size_t i) { return p_[i]; }
  const T& operator[](std::size_t i) const { return p_[i]; }
  T* begin() { return p_.get(); }
  T* end() { return p_.get() + n_; }
  const T* begin() const { return p_.get(); }
  const T* end() const { return p_.get() + n_; }
  friend bool operator==(const Buf& a, const Buf& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  std::size_t n_ = 0;
  std::unique_ptr<T[]> p_;
};

template <class T>
Buf<T> random_values(std::size_t n, std::uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Buf<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_same_v<T, bool>)
      x = dist(gen) > 0;
    else if constexpr (std::is_integral_v<T>)
      x = static_cast<T>(static_cast<std::int64_t>(dist(gen) * 1e9));
    else if constexpr (xdev::kernels::detail::is_half<T>)
      x = T(static_cast<float>(dist(gen)));
    else
      x = static_cast<T>(dist(gen));
  }
  return v;
}

template <class C>
bool same_bytes(const C& a, const C& b) {
  return a.size() == b.size() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(typename C::value_type)) == 0);
}

template <class T>
std::uint64_t bits_of(T x) {
  std::uint64_t r = 0;
  std::memcpy(&r, &x, sizeof x);
  return r;
}

// Sizes around the interesting boundaries: empty, one element, odd, the elementwise grain.
const std::vector<std::size_t> sizes = {0, 1, 7, 16, 17, 255, 257, 65536, 65537 * 3};

// ---------------------------------------------------------------------------------------------
// parallel_for

TEST(HostParallelFor, CoversEveryIndexExactlyOnceInChunksOfAtLeastGrain) {
  Pool pool(3);
  for (const Parallel& par : {serial, pool.par, Parallel{&pool.pool, 1}}) {
    for (std::size_t n : {0u, 1u, 5u, 100u, 1000u, 100003u}) {
      for (std::size_t grain : {0u, 1u, 7u, 64u, 5000u}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<std::size_t> smallest{n + 1};
        std::atomic<int> calls{0};
        host::parallel_for(par, n, grain, [&](std::size_t b, std::size_t e) {
          ASSERT_LT(b, e);
          ASSERT_LE(e, n);
          ++calls;
          std::size_t s = smallest.load();
          while (e - b < s && !smallest.compare_exchange_weak(s, e - b)) {
          }
          for (std::size_t i = b; i < e; ++i) ++hits[i];
        });
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
        if (n == 0) {
          EXPECT_EQ(calls.load(), 0);
        }
        if (n > 0 && n <= std::max<std::size_t>(grain, 1)) {
          EXPECT_EQ(calls.load(), 1);
        }
        if (calls.load() > 1) {
          EXPECT_GE(smallest.load(), std::max<std::size_t>(grain, 1));
        }
      }
    }
  }
}

TEST(HostParallelFor, SmallRangesRunInlineOnTheCallingThread) {
  Pool pool(2);
  std::thread::id seen;
  int calls = 0;
  host::parallel_for(pool.par, 10, 10, [&](std::size_t b, std::size_t e) {
    seen = std::this_thread::get_id();
    EXPECT_EQ(b, 0u);
    EXPECT_EQ(e, 10u);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, std::this_thread::get_id());
}

TEST(HostParallelFor, UsesThePoolForLargeRanges) {
  Pool pool(2);
  std::mutex m;
  std::set<std::thread::id> threads;
  for (int attempt = 0; attempt < 50 && threads.size() < 2; ++attempt) {
    host::parallel_for(pool.par, 64, 1, [&](std::size_t, std::size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard lock(m);
      threads.insert(std::this_thread::get_id());
    });
  }
  EXPECT_EQ(threads.size(), 2u);  // the caller and one pool thread: at most `workers` threads
}

TEST(HostParallelFor, RethrowsTheFirstExceptionAfterRunningChunksFinished) {
  Pool pool(4);
  std::atomic<int> running{0};
  try {
    host::parallel_for(pool.par, 1000, 1, [&](std::size_t b, std::size_t) {
      ++running;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      --running;
      if (b == 0) throw std::runtime_error("chunk 0 failed");
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "chunk 0 failed");
  }
  EXPECT_EQ(running.load(), 0);  // nothing still running when parallel_for returned
  // Serial path: the exception passes straight through.
  EXPECT_THROW(host::parallel_for(serial, 10, 1, [](std::size_t, std::size_t) { throw std::logic_error("x"); }),
               std::logic_error);
}

TEST(HostParallelFor, NestedCallsFromEveryPoolThreadDoNotDeadlock) {
  // Deliberately leaked on failure: a deadlocked pool could not be joined.
  auto* pool = new boost::asio::thread_pool(2);
  const Parallel par{pool, 2};
  constexpr int tasks = 16;
  std::vector<std::future<std::size_t>> done;
  for (int t = 0; t < tasks; ++t) {
    auto p = std::make_shared<std::promise<std::size_t>>();
    done.push_back(p->get_future());
    boost::asio::post(*pool, [p, par] {
      std::atomic<std::size_t> total{0};
      // Every pool thread ends up here, each posting helpers nobody is free to run.
      host::parallel_for(par, 1000, 1, [&](std::size_t b, std::size_t e) {
        host::parallel_for(par, 100, 1, [&](std::size_t b2, std::size_t e2) { total += (e - b) * (e2 - b2); });
      });
      p->set_value(total.load());
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (auto& f : done) {
    if (f.wait_until(deadline) != std::future_status::ready) {
      FAIL() << "parallel_for from inside the pool did not finish within 30 s (deadlock)";
    }
    EXPECT_EQ(f.get(), 1000u * 100u);
  }
  pool->join();
  delete pool;
}

TEST(HostParallelFor, WorksWithAPoolOfOneThreadAndMoreWorkersClaimed) {
  // A Parallel that over-states its workers still completes: the caller runs what nobody claims.
  boost::asio::thread_pool pool(1);
  std::atomic<std::size_t> total{0};
  host::parallel_for(Parallel{&pool, 8}, 10000, 1, [&](std::size_t b, std::size_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 10000u);
  pool.join();
}

// ---------------------------------------------------------------------------------------------
// Element-wise kernels

template <class T>
class HostElementwiseTyped : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double, f16, bf16, std::int32_t, std::int64_t, std::uint8_t, bool>;
TYPED_TEST_SUITE(HostElementwiseTyped, ElementTypes);

template <class T>
T ref_add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>)
    return a || b;
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
  else if constexpr (xdev::kernels::detail::is_half<T>)
    return T(static_cast<float>(a) + static_cast<float>(b));
  else
    return a + b;
}

template <class T>
T ref_mul(T a, T b) {
  if constexpr (std::is_same_v<T, bool>)
    return a && b;
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
  else if constexpr (xdev::kernels::detail::is_half<T>)
    return T(static_cast<float>(a) * static_cast<float>(b));
  else
    return a * b;
}

template <class T>
T value(double v) {
  if constexpr (std::is_same_v<T, bool>)
    return v != 0;
  else if constexpr (xdev::kernels::detail::is_half<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

TYPED_TEST(HostElementwiseTyped, FillScaleAxpyBinaryMatchTheReference) {
  using T = TypeParam;
  Pool pool(4);
  for (const Parallel& par : {serial, pool.par}) {
    for (std::size_t n : sizes) {
      const auto a = random_values<T>(n, 1), b = random_values<T>(n, 2);
      const T alpha = value<T>(3);

      Buf<T> x(n);
      host::fill(par, x.data(), n, alpha);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(x[i]), bits_of(alpha));

      x = a;
      host::scale(par, x.data(), n, alpha);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(x[i]), bits_of(ref_mul(a[i], alpha))) << i;

      Buf<T> y = b;
      host::axpy(par, alpha, a.data(), y.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        T expected;
        if constexpr (xdev::kernels::detail::is_half<T>)
          expected = T(static_cast<float>(b[i]) + static_cast<float>(alpha) * static_cast<float>(a[i]));
        else
          expected = ref_add(b[i], ref_mul(alpha, a[i]));
        if constexpr (std::is_floating_point_v<T>)
          ASSERT_NEAR(static_cast<double>(y[i]), static_cast<double>(expected),
                      4 * std::numeric_limits<T>::epsilon() * (std::abs(static_cast<double>(expected)) + 3));
        else if constexpr (xdev::kernels::detail::is_half<T>)  // one f16/bf16 ulp: FMA contraction may differ
          ASSERT_NEAR(static_cast<float>(y[i]), static_cast<float>(expected),
                      0x1p-7f * (std::abs(static_cast<float>(expected)) + 3));
        else
          ASSERT_EQ(bits_of(y[i]), bits_of(expected)) << i;
      }

      Buf<T> out(n);
      host::binary(par, xdev::ops::BinaryOp::add, a.data(), b.data(), out.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(out[i]), bits_of(ref_add(a[i], b[i]))) << i;
      host::binary(par, xdev::ops::BinaryOp::mul, a.data(), b.data(), out.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(out[i]), bits_of(ref_mul(a[i], b[i]))) << i;

      // minimum / maximum: exact for every dtype (nothing rounds); (b < a) ? b : a and (a < b) ? b : a.
      auto num = [](T v) {
        if constexpr (xdev::kernels::detail::is_half<T>)
          return static_cast<double>(static_cast<float>(v));
        else
          return static_cast<double>(v);
      };
      host::binary(par, xdev::ops::BinaryOp::min, a.data(), b.data(), out.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        const bool b_less = num(b[i]) < num(a[i]);
        ASSERT_EQ(bits_of(out[i]), bits_of(b_less ? b[i] : a[i])) << i;
      }
      host::binary(par, xdev::ops::BinaryOp::max, a.data(), b.data(), out.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        const bool a_less = num(a[i]) < num(b[i]);
        ASSERT_EQ(bits_of(out[i]), bits_of(a_less ? b[i] : a[i])) << i;
      }

      // out aliasing a, then b.
      Buf<T> alias = a;
      host::binary(par, xdev::ops::BinaryOp::add, alias.data(), b.data(), alias.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(alias[i]), bits_of(ref_add(a[i], b[i])));
      alias = b;
      host::binary(par, xdev::ops::BinaryOp::mul, a.data(), alias.data(), alias.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(alias[i]), bits_of(ref_mul(a[i], b[i])));
      // Both operands the output: x * x.
      alias = a;
      host::binary(par, xdev::ops::BinaryOp::mul, alias.data(), alias.data(), alias.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(alias[i]), bits_of(ref_mul(a[i], a[i])));
    }
  }
}

TEST(HostElementwise, IntegerArithmeticWrapsInsteadOfOverflowing) {
  const std::int32_t big = std::numeric_limits<std::int32_t>::max();
  std::int32_t a[2] = {big, std::numeric_limits<std::int32_t>::min()}, b[2] = {1, -1}, out[2];
  host::binary(serial, xdev::ops::BinaryOp::add, a, b, out, 2);
  EXPECT_EQ(out[0], std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(out[1], big);
  std::uint8_t u[1] = {200}, v[1] = {100}, w[1];
  host::binary(serial, xdev::ops::BinaryOp::add, u, v, w, 1);
  EXPECT_EQ(w[0], 44);
}

TEST(HostElementwise, UnknownBinaryOpIsAnInvalidArgument) {
  float a[1] = {1}, out[1];
  try {
    host::binary(serial, static_cast<xdev::ops::BinaryOp>(7), a, a, out, 1);
    FAIL();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("unknown BinaryOp value 7"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// sum

template <class C>
double exact_sum(const C& x) {  // long double is plenty for these sizes
  long double s = 0;
  for (auto v : x) s += static_cast<long double>(static_cast<double>(v));
  return static_cast<double>(s);
}

TEST(HostSum, MatchesTheReferenceForEverySize) {
  Pool pool(4);
  for (std::size_t n : {0u, 1u, 15u, 16u, 17u, 255u, 256u, 257u, 16383u, 16384u, 16385u, 1000003u}) {
    const auto xf = random_values<float>(n, 3);
    const auto xd = random_values<double>(n, 4);
    double abs_f = 0, abs_d = 0;
    for (float v : xf) abs_f += std::abs(v);
    for (double v : xd) abs_d += std::abs(v);
    const float sf = host::sum(pool.par, xf.data(), n);
    const double sd = host::sum(pool.par, xd.data(), n);
    const double logn = std::log2(double(n) + 2);
    EXPECT_NEAR(sf, exact_sum(xf), (32 + logn) * 6e-8 * abs_f + 1e-30) << n;
    EXPECT_NEAR(sd, exact_sum(xd), (32 + logn) * 1.2e-16 * abs_d + 1e-300) << n;
    EXPECT_EQ(bits_of(sf), bits_of(host::sum(serial, xf.data(), n))) << "thread count changed the result, n=" << n;
    EXPECT_EQ(bits_of(sd), bits_of(host::sum(serial, xd.data(), n))) << n;
  }
}

TEST(HostSum, TenMillionTimesPointOneInFloatHasRelativeErrorBelowOneInAMillion) {
  constexpr std::size_t n = 10'000'000;
  const std::vector<float> x(n, 0.1f);
  const double exact = static_cast<double>(n) * static_cast<double>(0.1f);
  Pool pool(2);
  for (const Parallel& par : {serial, pool.par}) {
    const float s = host::sum(par, x.data(), n);
    EXPECT_LT(std::abs(static_cast<double>(s) - exact) / exact, 1e-6) << "sum = " << s;
  }
  // Sanity check of the test: a running float sum misses the bound by far.
  float naive = 0;
  for (float v : x) naive += v;
  EXPECT_GT(std::abs(static_cast<double>(naive) - exact) / exact, 1e-6) << "naive = " << naive;
}

TEST(HostSum, IntegersWrapAndHalfTypesAccumulateInFloat) {
  std::vector<std::int32_t> i(100000, std::numeric_limits<std::int32_t>::max());
  std::uint32_t expected = 0;
  for (std::int32_t v : i) expected += static_cast<std::uint32_t>(v);
  EXPECT_EQ(host::sum(serial, i.data(), i.size()), static_cast<std::int32_t>(expected));
  std::vector<std::uint8_t> u(1000, 255);
  EXPECT_EQ(host::sum(serial, u.data(), u.size()), static_cast<std::uint8_t>(255u * 1000u));
  std::vector<std::int64_t> l(70000);
  for (std::size_t k = 0; k < l.size(); ++k) l[k] = static_cast<std::int64_t>(k) - 1000;
  std::int64_t ls = 0;
  for (auto v : l) ls += v;
  EXPECT_EQ(host::sum(serial, l.data(), l.size()), ls);

  // 4096 ones in f16: a running f16 sum would stop at 2048; the float accumulator reaches 4096.
  std::vector<f16> h(4096, f16(1.0f));
  EXPECT_EQ(static_cast<float>(host::sum(serial, h.data(), h.size())), 4096.0f);
  std::vector<bf16> hb(1000, bf16(0.5f));
  EXPECT_EQ(static_cast<float>(host::sum(serial, hb.data(), hb.size())), 500.0f);
  EXPECT_EQ(host::sum(serial, static_cast<const float*>(nullptr), 0), 0.0f);
}

// ---------------------------------------------------------------------------------------------
// sum_axis

TEST(HostSumAxis, MatchesTheReferenceForManyShapes) {
  Pool pool(4);
  using Shape = std::tuple<std::size_t, std::size_t, std::size_t>;
  for (auto [outer, axis, inner] :
       {Shape{1, 1, 1}, Shape{3, 7, 5}, Shape{2, 1000, 1}, Shape{4, 300, 257}, Shape{1, 100000, 1}, Shape{2, 3, 1000},
        Shape{5, 33, 2}, Shape{1, 70000, 3}, Shape{40000, 3, 1}, Shape{2, 1, 600}}) {
    const std::size_t total = outer * axis * inner;
    const auto x = random_values<float>(total, 5);
    std::vector<float> out(outer * inner, -1.0f), out_serial(outer * inner, -2.0f);
    host::sum_axis(pool.par, x.data(), outer, axis, inner, out.data());
    host::sum_axis(serial, x.data(), outer, axis, inner, out_serial.data());
    EXPECT_TRUE(same_bytes(out, out_serial)) << outer << "x" << axis << "x" << inner;
    for (std::size_t o = 0; o < outer; ++o)
      for (std::size_t i = 0; i < inner; ++i) {
        double ref = 0, abs = 0;
        for (std::size_t a = 0; a < axis; ++a) {
          ref += x[(o * axis + a) * inner + i];
          abs += std::abs(x[(o * axis + a) * inner + i]);
        }
        ASSERT_NEAR(out[o * inner + i], ref, (32 + std::log2(double(axis))) * 6e-8 * abs + 1e-30)
            << outer << "x" << axis << "x" << inner << " at " << o << "," << i;
      }
    if (inner == 1) {  // each row is summed exactly as sum() does
      for (std::size_t o = 0; o < outer; ++o)
        ASSERT_EQ(bits_of(out[o]), bits_of(host::sum(serial, x.data() + o * axis, axis)));
    }
  }
}

TEST(HostSumAxis, EmptyAxisGivesZerosAndDoubleAndHalfWork) {
  std::vector<double> out(6, 7.0);
  host::sum_axis(serial, static_cast<const double*>(nullptr), 2, 0, 3, out.data());
  for (double v : out) EXPECT_EQ(v, 0.0);
  std::vector<f16> h(2 * 3000 * 2, f16(1.0f));
  std::vector<f16> ho(4);
  host::sum_axis(serial, h.data(), 2, 3000, 2, ho.data());
  for (f16 v : ho) EXPECT_EQ(static_cast<float>(v), 3000.0f);  // 3000 is exact in f16
  std::vector<std::int64_t> li = {1, 2, 3, 4, 5, 6}, lo(2);
  host::sum_axis(serial, li.data(), 1, 3, 2, lo.data());
  EXPECT_EQ(lo, (std::vector<std::int64_t>{9, 12}));
}

// ---------------------------------------------------------------------------------------------
// dot

template <class T>
T round_to(T x, DType compute) {
  if (compute == DType::f16) {
    if constexpr (std::is_same_v<T, float>)
      return static_cast<float>(xdev::to_f16(x));
    else
      return static_cast<double>(static_cast<float>(host::detail::to_f16(x)));
  }
  if (compute == DType::bf16) {
    if constexpr (std::is_same_v<T, float>)
      return static_cast<float>(xdev::to_bf16(x));
    else
      return static_cast<double>(static_cast<float>(host::detail::to_bf16(x)));
  }
  if (compute == DType::f32) return static_cast<T>(static_cast<float>(x));
  return x;
}

template <class T>
void check_dot(DType compute) {
  Pool pool(4);
  for (std::size_t n : {0u, 1u, 17u, 1000u, 65537u, 300001u}) {
    const auto x = random_values<T>(n, 6), y = random_values<T>(n, 7);
    long double ref = 0, abs = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double p = static_cast<double>(round_to(x[i], compute)) * static_cast<double>(round_to(y[i], compute));
      ref += p;
      abs += std::abs(p);
    }
    const T d = host::dot(pool.par, x.data(), y.data(), n, compute);
    EXPECT_NEAR(static_cast<double>(d), static_cast<double>(ref),
                (34 + std::log2(double(n) + 2)) * std::numeric_limits<T>::epsilon() * static_cast<double>(abs) + 1e-30)
        << n << " " << compute;
    EXPECT_EQ(bits_of(d), bits_of(host::dot(serial, x.data(), y.data(), n, compute))) << n;
  }
}

TEST(HostDot, FullPrecisionMatchesTheReference) {
  check_dot<float>(DType::f32);
  check_dot<double>(DType::f64);
}

TEST(HostDot, AutocastRoundsTheInputsFirst) {
  check_dot<float>(DType::f16);
  check_dot<float>(DType::bf16);
  check_dot<double>(DType::bf16);
  check_dot<double>(DType::f16);
  check_dot<double>(DType::f32);
  // Observable: 1 + 2^-9 is 1 in bf16 (7 fraction bits), so the product is 1, not 1 + 2^-8.
  const float x[1] = {1.0f + 0x1p-9f};
  EXPECT_EQ(host::dot(serial, x, x, 1, DType::bf16), 1.0f);
  EXPECT_EQ(host::dot(serial, x, x, 1, DType::f16), (1.0f + 0x1p-9f) * (1.0f + 0x1p-9f));  // exact in f16
  EXPECT_EQ(host::dot(serial, x, x, 1, DType::f32), (1.0f + 0x1p-9f) * (1.0f + 0x1p-9f));
}

// g++ 12 -O2/-O3 once dropped the double -> float -> double rounding inside the vectorized sum:
// every input here rounds to exactly 1 in f32, so every result must be an exact integer.
TEST(HostDot, DoubleDataRoundedToF32IsExact) {
  const std::vector<double> x(4000, 1.0 + 0x1p-30);  // room for 9 x 300 matrices too
  for (std::size_t n : {1u, 15u, 16u, 17u, 32u, 40u, 256u, 300u, 1000u})
    EXPECT_EQ(host::dot(serial, x.data(), x.data(), n, DType::f32), static_cast<double>(n)) << n;
  for (std::size_t k : {1u, 15u, 16u, 17u, 40u, 300u}) {
    std::vector<double> c(7 * 9, std::numeric_limits<double>::quiet_NaN());
    host::gemm(serial, false, true, 7, 9, k, 1.0, x.data(), k, x.data(), k, 0.0, c.data(), 9, DType::f32);
    for (double v : c) ASSERT_EQ(v, static_cast<double>(k)) << k;
  }
}

TEST(HostDot, NonFloatingComputeIsAnInvalidArgument) {
  const float x[1] = {1};
  try {
    (void)host::dot(serial, x, x, 1, DType::i32);
    FAIL();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("dot: compute dtype i32 is not accepted for f32 data"), std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// gemm

struct GemmCase {
  bool ta, tb;
  std::size_t m, n, k;
  double alpha, beta;
  DType compute;
};

// The operands of one case, with padded leading dimensions; C is NaN when beta is 0.
template <class T>
struct GemmData {
  explicit GemmData(const GemmCase& g)
      : lda((g.ta ? g.m : g.k) + 3),
        ldb((g.tb ? g.k : g.n) + 1),
        ldc(g.n + 2),
        a(random_values<T>((g.ta ? g.k : g.m) * lda, static_cast<std::uint32_t>(g.m * 131 + g.k))),
        b(random_values<T>((g.tb ? g.n : g.k) * ldb, static_cast<std::uint32_t>(g.n * 17 + g.k + 1))),
        c0(random_values<T>(g.m * ldc, 99)) {
    if (g.beta == 0) std::fill(c0.begin(), c0.end(), std::numeric_limits<T>::quiet_NaN());
  }
  // C after the gemm of this case.
  Buf<T> run(const GemmCase& g, const Parallel& par, host::detail::GemmIsa isa) const {
    Buf<T> c = c0;
    host::detail::gemm_with(isa, par, g.ta, g.tb, g.m, g.n, g.k, static_cast<T>(g.alpha), a.data(), lda, b.data(), ldb,
                            static_cast<T>(g.beta), c.data(), ldc, g.compute);
    return c;
  }
  std::size_t lda, ldb, ldc;
  Buf<T> a, b, c0;
};

// Runs one gemm and checks every element of C against a naive reference accumulated in long
// double, with a bound of (k + 4) eps (|alpha| sum|a||b| + |beta c|).
template <class T>
void check_gemm(const GemmCase& g, const Parallel& par, host::detail::GemmIsa isa, Buf<T>* result = nullptr) {
  const GemmData<T> data(g);
  const std::size_t lda = data.lda, ldb = data.ldb, ldc = data.ldc;
  const Buf<T>& a = data.a;
  const Buf<T>& b = data.b;
  const Buf<T>& c0 = data.c0;
  Buf<T> c = data.run(g, par, isa);
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t i = 0; i < g.m; ++i) {
    for (std::size_t j = 0; j < g.n; ++j) {
      long double acc = 0, abs = 0;
      for (std::size_t p = 0; p < g.k; ++p) {
        const T av = g.ta ? a[p * lda + i] : a[i * lda + p];
        const T bv = g.tb ? b[j * ldb + p] : b[p * ldb + j];
        const long double prod = static_cast<long double>(round_to(av, g.compute)) * round_to(bv, g.compute);
        acc += prod;
        abs += std::abs(prod);
      }
      long double ref = static_cast<long double>(g.alpha) * acc;
      long double scale = std::abs(g.alpha) * abs;
      if (g.beta != 0) {
        ref += static_cast<long double>(g.beta) * c0[i * ldc + j];
        scale += std::abs(g.beta * c0[i * ldc + j]);
      }
      const double got = static_cast<double>(c[i * ldc + j]);
      ASSERT_FALSE(std::isnan(got)) << "NaN at " << i << "," << j;
      ASSERT_NEAR(got, static_cast<double>(ref), (double(g.k) + 4) * eps * static_cast<double>(scale) + 1e-300)
          << "ta=" << g.ta << " tb=" << g.tb << " m=" << g.m << " n=" << g.n << " k=" << g.k << " alpha=" << g.alpha
          << " beta=" << g.beta << " at " << i << "," << j;
    }
    for (std::size_t j = g.n; j < ldc; ++j)  // the padding between rows of C is not touched
      ASSERT_EQ(bits_of(c[i * ldc + j]), bits_of(c0[i * ldc + j]));
  }
  if (result) *result = std::move(c);
}

class HostGemmSweep : public ::testing::TestWithParam<std::tuple<bool, bool, bool>> {};

TEST_P(HostGemmSweep, AllShapesAgainstTheNaiveReference) {
  const auto [ta, tb, f64] = GetParam();
  Pool pool(2);
  const std::size_t dims[] = {1, 7, 64, 129, 300};
  for (std::size_t m : dims)
    for (std::size_t n : dims)
      for (std::size_t k : dims) {
        const GemmCase g{ta, tb, m, n, k, 1.0, 0.0, f64 ? DType::f64 : DType::f32};
        if (f64)
          check_gemm<double>(g, pool.par, host::detail::best_gemm_isa());
        else
          check_gemm<float>(g, pool.par, host::detail::best_gemm_isa());
        if (HasFatalFailure()) return;
      }
}

INSTANTIATE_TEST_SUITE_P(Transposes, HostGemmSweep,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "At" : "A") +
                                  (std::get<1>(info.param) ? "Bt" : "B") + (std::get<2>(info.param) ? "_f64" : "_f32");
                         });

TEST(HostGemm, AlphaBetaVariantsIncludingBetaZeroOverNaN) {
  Pool pool(2);
  for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {2.5, 0.0}, {1.0, 1.0}, {-0.5, 0.75}, {0.0, 0.5}, {0.0, 0.0}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_gemm<float>({ta, tb, 67, 45, 300, alpha, beta, DType::f32}, pool.par, host::detail::best_gemm_isa());
        check_gemm<double>({ta, tb, 33, 129, 20, alpha, beta, DType::f64}, pool.par, host::detail::best_gemm_isa());
        check_gemm<float>({ta, tb, 5, 3, 0, alpha, beta, DType::f32}, serial, host::detail::best_gemm_isa());
      }
}

TEST(HostGemm, AlphaZeroReadsNeitherANorB) {
  std::vector<float> a(4, std::numeric_limits<float>::quiet_NaN()), b = a, c = {1, 2, 3, 4};
  host::gemm(serial, false, false, 2, 2, 2, 0.0f, a.data(), 2, b.data(), 2, 2.0f, c.data(), 2, DType::f32);
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8}));
  host::gemm(serial, false, false, 2, 2, 2, 0.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2, DType::f32);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

TEST(HostGemm, EveryKernelFamilyTheCpuSupportsIsCorrect) {
  using Isa = host::detail::GemmIsa;
  Pool pool(2);
  for (Isa isa : {Isa::portable, Isa::sse2, Isa::avx2, Isa::avx512}) {
    if (!host::detail::gemm_isa_supported(isa)) {
      std::printf("kernel family %d not supported on this CPU: skipped\n", static_cast<int>(isa));
      continue;
    }
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (std::size_t s : {1u, 7u, 65u}) {
          check_gemm<float>({ta, tb, s, s + 2, s + 1, 1.5, 0.5, DType::f32}, pool.par, isa);
          check_gemm<double>({ta, tb, s + 1, s, s + 3, 1.0, 0.0, DType::f64}, pool.par, isa);
          check_gemm<float>({ta, tb, s, s, s, 1.0, 0.0, DType::bf16}, pool.par, isa);
        }
    check_gemm<float>({false, false, 100, 67, 530, 1.0, 1.0, DType::f32}, pool.par, isa);  // several K blocks
    if (HasFatalFailure()) return;
  }
}

TEST(HostGemm, ManyColumnPanelsAndDepthBlocks) {
  Pool pool(2);
  // n above the 4096-column panel width, k above two depth blocks.
  check_gemm<float>({false, true, 9, 4200, 530, 1.0, 0.25, DType::f32}, pool.par, host::detail::best_gemm_isa());
  check_gemm<double>({true, false, 13, 4500, 70, 2.0, 0.0, DType::f64}, pool.par, host::detail::best_gemm_isa());
}

TEST(HostGemm, AutocastRoundsInputsToTheComputeType) {
  Pool pool(2);
  for (DType compute : {DType::bf16, DType::f16}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_gemm<float>({ta, tb, 70, 33, 129, 1.0, 0.0, compute}, pool.par, host::detail::best_gemm_isa());
        check_gemm<double>({ta, tb, 20, 30, 40, 1.0, 0.5, compute}, pool.par, host::detail::best_gemm_isa());
      }
    // The rounding is observable: autocast differs from full precision on random data.
    Buf<float> full, cast;
    check_gemm<float>({false, false, 16, 16, 16, 1.0, 0.0, DType::f32}, serial, host::detail::best_gemm_isa(), &full);
    check_gemm<float>({false, false, 16, 16, 16, 1.0, 0.0, compute}, serial, host::detail::best_gemm_isa(), &cast);
    EXPECT_FALSE(same_bytes(full, cast)) << compute;
  }
  check_gemm<double>({false, false, 20, 30, 40, 1.0, 0.0, DType::f32}, pool.par, host::detail::best_gemm_isa());
}

TEST(HostGemm, ResultDoesNotDependOnTheThreadCount) {
  Pool pool4(4), pool2(2);
  for (auto [m, n, k] : {std::tuple{300u, 257u, 600u}, {1000u, 64u, 100u}, {8u, 2000u, 300u}}) {
    const GemmCase g{false, true, m, n, k, 1.0, 0.5, DType::f32};
    const GemmData<float> data(g);
    const auto r1 = data.run(g, serial, host::detail::best_gemm_isa());
    EXPECT_TRUE(same_bytes(r1, data.run(g, pool2.par, host::detail::best_gemm_isa())));
    EXPECT_TRUE(same_bytes(r1, data.run(g, pool4.par, host::detail::best_gemm_isa())));
    const GemmCase g64{true, false, m, n, k, 1.0, 0.0, DType::f64};
    const GemmData<double> data64(g64);
    EXPECT_TRUE(same_bytes(data64.run(g64, serial, host::detail::best_gemm_isa()),
                           data64.run(g64, pool4.par, host::detail::best_gemm_isa())));
  }
}

TEST(HostGemm, NonFloatingComputeIsAnInvalidArgument) {
  float a[1] = {1}, c[1] = {0};
  EXPECT_THROW(host::gemm(serial, false, false, 1, 1, 1, 1.0f, a, 1, a, 1, 0.0f, c, 1, DType::u8), xdev::error);
  EXPECT_EQ(c[0], 0.0f);
}

// ---------------------------------------------------------------------------------------------
// gather

template <class T, class I>
void check_gather_dense_equals_sparse(const Buf<T>& table, std::size_t rows, std::size_t cols) {
  Pool pool(2);
  std::mt19937 gen(11);
  for (std::size_t n : {0u, 1u, 5u, 1000u}) {
    std::vector<I> index(n);
    for (I& v : index) v = static_cast<I>(gen() % rows);
    Buf<T> sparse(n * cols), dense(n * cols);
    host::gather(pool.par, table.data(), rows, cols, index.data(), n, sparse.data(), false);
    host::gather(pool.par, table.data(), rows, cols, index.data(), n, dense.data(), true);
    ASSERT_TRUE(same_bytes(sparse, dense)) << "n=" << n;
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(std::memcmp(&sparse[i * cols], &table[static_cast<std::size_t>(index[i]) * cols], cols * sizeof(T)), 0);
  }
}

TEST(HostGather, DenseIsBitIdenticalToSparseWithNegativeZeroAndNaNPayloads) {
  constexpr std::size_t rows = 37, cols = 600;  // cols over one dense tile
  auto table = random_values<float>(rows * cols, 12);
  table[0] = -0.0f;
  table[1] = std::bit_cast<float>(0x7FC0'1234u);  // quiet NaN with payload
  table[2] = std::bit_cast<float>(0xFF80'0001u);  // signalling NaN, negative
  table[cols + 5] = -0.0f;
  table[5 * cols + 7] = std::bit_cast<float>(0x7FFF'FFFFu);
  check_gather_dense_equals_sparse<float, std::int32_t>(table, rows, cols);
  check_gather_dense_equals_sparse<float, std::int64_t>(table, rows, cols);

  auto dtable = random_values<double>(rows * 3, 13);
  dtable[0] = -0.0;
  dtable[4] = std::bit_cast<double>(0x7FF0'0000'0000'0F0Full);
  check_gather_dense_equals_sparse<double, std::int64_t>(dtable, rows, 3);

  Buf<f16> htable(rows * 9);
  for (std::size_t i = 0; i < htable.size(); ++i)
    htable[i] = f16::from_bits(static_cast<std::uint16_t>(i * 2654435761u));
  htable[3] = f16::from_bits(0x8000);
  htable[4] = f16::from_bits(0x7C01);
  check_gather_dense_equals_sparse<f16, std::int32_t>(htable, rows, 9);

  check_gather_dense_equals_sparse<std::int64_t, std::int32_t>(random_values<std::int64_t>(rows * 4, 14), rows, 4);
  check_gather_dense_equals_sparse<bool, std::int32_t>(random_values<bool>(rows * 5, 15), rows, 5);
  check_gather_dense_equals_sparse<std::uint8_t, std::int64_t>(random_values<std::uint8_t>(rows, 16), rows, 1);
}

TEST(HostGather, OutOfRangeIndexFailsWithItsValueAndPositionAndLeavesOutUntouched) {
  Pool pool(2);
  const auto table = random_values<float>(10 * 4, 17);
  for (bool dense : {false, true}) {
    for (const Parallel& par : {serial, pool.par}) {
      std::vector<std::int64_t> index(200000, 3);
      index[150001] = 10;
      index[170000] = -1;
      std::vector<float> out(index.size() * 4, 42.0f);
      try {
        host::gather(par, table.data(), 10, 4, index.data(), index.size(), out.data(), dense);
        FAIL() << "no error";
      } catch (const xdev::error& e) {
        EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
        EXPECT_NE(
            std::string(e.what()).find("gather: index 10 at position 150001 is out of range for a table of 10 rows"),
            std::string::npos)
            << e.what();
      }
      EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == 42.0f; }));

      std::vector<std::int32_t> neg = {0, 1, -3};
      std::vector<float> out2(12, 42.0f);
      try {
        host::gather(par, table.data(), 10, 4, neg.data(), neg.size(), out2.data(), dense);
        FAIL() << "no error";
      } catch (const xdev::error& e) {
        EXPECT_NE(std::string(e.what()).find("gather: index -3 at position 2 is out of range for a table of 10 rows"),
                  std::string::npos)
            << e.what();
      }
      EXPECT_TRUE(std::all_of(out2.begin(), out2.end(), [](float v) { return v == 42.0f; }));
    }
  }
  // An empty table: any index is out of range; no index is fine.
  std::int32_t zero = 0;
  float out = 1;
  EXPECT_THROW(host::gather(serial, static_cast<const float*>(nullptr), 0, 3, &zero, 1, &out, false), xdev::error);
  EXPECT_NO_THROW(host::gather(serial, static_cast<const float*>(nullptr), 0, 3, &zero, 0, &out, true));
}

// ---------------------------------------------------------------------------------------------
// convert

template <class S, class D>
Buf<D> converted(const Buf<S>& src, const Parallel& par = serial) {
  Buf<D> dst(src.size());
  host::convert(par, src.data(), dst.data(), src.size());
  return dst;
}

TEST(HostConvert, HalfTypesRoundTripThroughFloatAndDoubleForEveryBitPattern) {
  Buf<f16> h(65536);
  Buf<bf16> b(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) {
    h[i] = f16::from_bits(static_cast<std::uint16_t>(i));
    b[i] = bf16::from_bits(static_cast<std::uint16_t>(i));
  }
  const auto hf = converted<f16, float>(h);
  const auto h_back = converted<float, f16>(hf);
  const auto h_back_d = converted<double, f16>(converted<f16, double>(h));
  const auto b_back = converted<float, bf16>(converted<bf16, float>(b));
  const auto b_back_d = converted<double, bf16>(converted<bf16, double>(b));
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const bool h_nan = std::isnan(hf[i]);
    if (!h_nan) {
      ASSERT_EQ(h_back[i].bits, i);
      ASSERT_EQ(h_back_d[i].bits, i);
    } else {
      ASSERT_TRUE(std::isnan(static_cast<float>(h_back[i])) && std::isnan(static_cast<float>(h_back_d[i])));
    }
    if (!std::isnan(static_cast<float>(b[i]))) {
      ASSERT_EQ(b_back[i].bits, i);
      ASSERT_EQ(b_back_d[i].bits, i);
    }
  }
}

TEST(HostConvert, RoundsToNearestEvenOnceFromDoubleAndIntegers) {
  // Just above a tie: correct rounding goes up, while rounding through float first lands exactly on
  // the tie and then rounds to even (down).
  const Buf<double> d = {1.0 + 0x1p-11 + 0x1p-40,
                         1.0 + 0x1p-11,
                         1.0 + 3 * 0x1p-11,
                         -(1.0 + 0x1p-11 + 0x1p-40),
                         65519.99999999,
                         65520.0,
                         1e300,
                         0x1p-25,
                         0x1p-25 + 0x1p-60,
                         -0.0};
  const auto h = converted<double, f16>(d);
  EXPECT_EQ(h[0].bits, 0x3C01);                                    // 1 + 2^-10
  EXPECT_EQ(xdev::to_f16(static_cast<float>(d[0])).bits, 0x3C00);  // the double rounding this avoids
  EXPECT_EQ(h[1].bits, 0x3C00);                                    // a tie: to even
  EXPECT_EQ(h[2].bits, 0x3C02);                                    // a tie: to even (up)
  EXPECT_EQ(h[3].bits, 0xBC01);
  EXPECT_EQ(h[4].bits, 0x7BFF);  // below the overflow threshold
  EXPECT_EQ(h[5].bits, 0x7C00);  // the threshold: infinity
  EXPECT_EQ(h[6].bits, 0x7C00);
  EXPECT_EQ(h[7].bits, 0x0000);  // half the smallest subnormal: tie to even zero
  EXPECT_EQ(h[8].bits, 0x0001);  // just above it
  EXPECT_EQ(h[9].bits, 0x8000);

  const Buf<double> db = {1.0 + 0x1p-8 + 0x1p-30, 1.0 + 0x1p-8, 1e39, -3.0e38};
  const auto b = converted<double, bf16>(db);
  EXPECT_EQ(b[0].bits, 0x3F81);
  EXPECT_EQ(b[1].bits, 0x3F80);
  EXPECT_EQ(b[2].bits, 0x7F80);  // beyond float: infinity
  EXPECT_EQ(b[3].bits, xdev::to_bf16(-3.0e38f).bits);

  // Integers: 2^24 + 2^16 + 1 must round up to 2^24 + 2^17 in bf16 (through float it would tie down).
  const Buf<std::int32_t> i32 = {(1 << 24) + (1 << 16) + 1, 65504, 65520, -7, 0};
  const auto bi = converted<std::int32_t, bf16>(i32);
  EXPECT_EQ(static_cast<float>(bi[0]), 16908288.0f);
  const auto hi = converted<std::int32_t, f16>(i32);
  EXPECT_EQ(static_cast<float>(hi[1]), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(hi[2])));
  EXPECT_EQ(static_cast<float>(hi[3]), -7.0f);
  const Buf<std::int64_t> i64 = {(std::int64_t{1} << 62) + (std::int64_t{1} << 54) + 1,
                                 -((std::int64_t{1} << 62) + (std::int64_t{1} << 54) + 1),
                                 std::numeric_limits<std::int64_t>::min()};
  const auto b64 = converted<std::int64_t, bf16>(i64);
  EXPECT_EQ(static_cast<float>(b64[0]), 0x1.02p62f);  // 2^62 + 2^55
  EXPECT_EQ(static_cast<float>(b64[1]), -0x1.02p62f);
  EXPECT_EQ(static_cast<float>(b64[2]), -0x1p63f);

  // f16 <-> bf16 through float, one rounding.
  const auto fb = converted<f16, bf16>(Buf<f16>{f16(1.0f + 0x1p-10f), f16(-65504.0f)});
  EXPECT_EQ(fb[0].bits, 0x3F80);  // 1 + 2^-10 rounds to 1 in bf16
  EXPECT_EQ(fb[1].bits, xdev::to_bf16(-65504.0f).bits);
  const auto bf = converted<bf16, f16>(Buf<bf16>{bf16(1e10f), bf16(3.0f)});
  EXPECT_EQ(bf[0].bits, 0x7C00);
  EXPECT_EQ(bf[1].bits, 0x4200);
}

TEST(HostConvert, FloatingToIntegerTruncatesAndSaturatesAndNaNIsZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Buf<float> f = {2.9f, -2.9f, -0.9f, 1e10f, -1e10f, nan, inf, -inf, 255.5f, 300.0f, -5.0f};
  const auto i = converted<float, std::int32_t>(f);
  EXPECT_EQ(i,
            (Buf<std::int32_t>{2, -2, 0, 2147483647, -2147483647 - 1, 0, 2147483647, -2147483647 - 1, 255, 300, -5}));
  const auto u = converted<float, std::uint8_t>(f);
  EXPECT_EQ(u, (Buf<std::uint8_t>{2, 0, 0, 255, 0, 0, 255, 0, 255, 255, 0}));
  const Buf<double> d = {1e19, -1e19, -0x1p63, 0x1p62, std::nan("")};
  const auto l = converted<double, std::int64_t>(d);
  EXPECT_EQ(l, (Buf<std::int64_t>{std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(),
                                  std::numeric_limits<std::int64_t>::min(), std::int64_t{1} << 62, 0}));
  const auto hi = converted<f16, std::int32_t>(Buf<f16>{f16(-3.5f), f16::from_bits(0x7E00)});
  EXPECT_EQ(hi, (Buf<std::int32_t>{-3, 0}));
}

TEST(HostConvert, BoolAndIntegerConversions) {
  const Buf<float> f = {0.0f, -0.0f, 0.5f, std::numeric_limits<float>::quiet_NaN(), -2.0f};
  const auto b = converted<float, bool>(f);
  EXPECT_EQ(b, (Buf<bool>{false, false, true, true, true}));
  const Buf<bool> bools = {true, false};
  const auto hb = converted<bool, f16>(bools);
  EXPECT_EQ(hb[0].bits, 0x3C00);
  EXPECT_EQ(hb[1].bits, 0x0000);
  EXPECT_EQ((converted<bool, double>(bools)), (Buf<double>{1.0, 0.0}));
  EXPECT_EQ((converted<bool, std::uint8_t>(bools)), (Buf<std::uint8_t>{1, 0}));
  const auto narrow = converted<std::int64_t, std::int32_t>(Buf<std::int64_t>{(std::int64_t{1} << 32) + 5, -1});
  EXPECT_EQ(narrow, (Buf<std::int32_t>{5, -1}));
  const auto u8 = converted<std::int32_t, std::uint8_t>(Buf<std::int32_t>{257, -1});
  EXPECT_EQ(u8, (Buf<std::uint8_t>{1, 255}));
  const auto roundtrip = converted<double, std::int32_t>(converted<std::int32_t, double>(Buf<std::int32_t>{
      std::numeric_limits<std::int32_t>::min(), -1, 0, 123456789, std::numeric_limits<std::int32_t>::max()}));
  EXPECT_EQ(roundtrip, (Buf<std::int32_t>{std::numeric_limits<std::int32_t>::min(), -1, 0, 123456789,
                                          std::numeric_limits<std::int32_t>::max()}));
  const auto fd = converted<double, float>(converted<float, double>(random_values<float>(1000, 18)));
  EXPECT_TRUE(same_bytes(fd, random_values<float>(1000, 18)));
}

// Values that exercise every rounding path: ties, overflow, subnormals, NaNs, signed zeros.
template <class S>
Buf<S> tricky_values(std::size_t n) {
  Buf<S> v = random_values<S>(n, 21, -70000, 70000);
  if constexpr (std::is_floating_point_v<S>) {
    const S specials[] = {S(0),
                          -S(0),
                          std::numeric_limits<S>::quiet_NaN(),
                          std::numeric_limits<S>::infinity(),
                          -std::numeric_limits<S>::infinity(),
                          std::numeric_limits<S>::denorm_min(),
                          std::numeric_limits<S>::max(),
                          S(65504),
                          S(65520),
                          S(1) + std::numeric_limits<S>::epsilon(),
                          S(1.0 + 0x1p-11),
                          S(1.0 + 0x1p-8),
                          S(1e-8),
                          S(-2.5),
                          S(3e9),
                          S(-1e19)};
    for (std::size_t i = 0; i < n; i += 7) v[i] = specials[(i / 7) % std::size(specials)];
    for (std::size_t i = 3; i < n; i += 11) v[i] = v[i] * S(1e-30);  // tiny values
  } else if constexpr (std::is_same_v<S, std::int64_t>) {
    for (std::size_t i = 0; i < n; i += 5) v[i] = static_cast<std::int64_t>(0x4010'0000'0000'0001ull) + std::int64_t(i);
  }
  return v;
}

// convert() of a large array (vectorized loops, parallel chunks) equals converting each element
// through a function pointer the compiler cannot see through (so no vectorization there).
template <class S, class D>
void check_convert_elementwise() {
  static D (*volatile one)(S) = &host::detail::convert_one<D, S>;
  Pool pool(2);
  const auto src = tricky_values<S>(200003);
  const auto got = converted<S, D>(src, pool.par);
  for (std::size_t i = 0; i < src.size(); ++i) {
    const D want = one(src[i]);
    ASSERT_EQ(bits_of(got[i]), bits_of(want)) << "element " << i;
  }
}

TEST(HostConvert, LargeArraysMatchElementByElementConversion) {
  check_convert_elementwise<double, f16>();
  check_convert_elementwise<double, bf16>();
  check_convert_elementwise<double, float>();
  check_convert_elementwise<float, f16>();
  check_convert_elementwise<float, bf16>();
  check_convert_elementwise<double, std::int32_t>();
  check_convert_elementwise<float, std::uint8_t>();
  check_convert_elementwise<double, std::int64_t>();
  check_convert_elementwise<std::int64_t, bf16>();
  check_convert_elementwise<std::int64_t, f16>();
  check_convert_elementwise<std::int32_t, bf16>();
  check_convert_elementwise<std::int64_t, float>();
  check_convert_elementwise<float, bool>();
}

TEST(HostConvert, ParallelEqualsSerial) {
  Pool pool(4);
  const auto d = random_values<double>(500000, 19, -70000, 70000);
  EXPECT_TRUE(same_bytes(converted<double, f16>(d, pool.par), converted<double, f16>(d)));
  EXPECT_TRUE(same_bytes(converted<double, bf16>(d, pool.par), converted<double, bf16>(d)));
  EXPECT_TRUE(same_bytes(converted<double, std::int32_t>(d, pool.par), converted<double, std::int32_t>(d)));
  Buf<double> copy(d.size());
  host::convert(pool.par, d.data(), copy.data(), d.size());
  EXPECT_TRUE(same_bytes(copy, d));
}

// The sources of a conversion test: every bit pattern of the 16-bit floats (signaling NaNs
// included), else `tricky_values` (every u8 among them).
template <class S>
Buf<S> convert_sources() {
  if constexpr (xdev::kernels::detail::is_half<S>) {
    Buf<S> v(65536 * 3);  // three times, so that the input spans several parallel chunks
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = S::from_bits(static_cast<std::uint16_t>(i));
    return v;
  } else {
    Buf<S> v = tricky_values<S>(200003);
    if constexpr (std::is_same_v<S, std::uint8_t>)
      for (std::size_t i = 0; i < 256; ++i) v[i] = static_cast<std::uint8_t>(i);
    return v;
  }
}

// The run-time dtype overload of convert(), for the pair (S, D): every element as convert_one()
// gives it (through a function pointer the compiler cannot see through), the same dtype a copy.
template <class S, class D>
void check_convert_by_dtype(const Parallel& par) {
  static D (*volatile one)(S) = &host::detail::convert_one<D, S>;
  const auto src = convert_sources<S>();
  Buf<D> got(src.size());
  host::convert(par, xdev::dtype_of<S>, src.data(), xdev::dtype_of<D>, got.data(), src.size());
  for (std::size_t i = 0; i < src.size(); ++i)
    ASSERT_EQ(bits_of(got[i]), bits_of(one(src[i])))
        << xdev::dtype_of<S> << " -> " << xdev::dtype_of<D> << ", element " << i << " (bits " << bits_of(src[i]) << ")";
  EXPECT_TRUE(same_bytes(converted<S, D>(src, par), got));  // the typed overload: the same
}

template <class S, class... Ds>
void check_convert_by_dtype_from(const Parallel& par, ::testing::Types<Ds...>) {
  (check_convert_by_dtype<S, Ds>(par), ...);
}

template <class... Ss>
void check_convert_by_dtype_all(const Parallel& par, ::testing::Types<Ss...> types) {
  (check_convert_by_dtype_from<Ss>(par, types), ...);
}

TEST(HostConvert, EveryPairByRunTimeDTypeMatchesElementByElementConversion) {
  Pool pool(3);
  check_convert_by_dtype_all(pool.par, ElementTypes{});
}

TEST(HostConvert, ByRunTimeDTypeSameDTypeInPlaceIsANoOpAndAnUnknownDTypeThrows) {
  Buf<float> x{1.0f, -2.0f, std::numeric_limits<float>::quiet_NaN()};
  const Buf<float> before = x;
  host::convert(serial, DType::f32, x.data(), DType::f32, x.data(), x.size());
  EXPECT_TRUE(same_bytes(x, before));
  Buf<double> out(x.size(), 7.0);
  EXPECT_THROW(host::convert(serial, static_cast<DType>(8), x.data(), DType::f64, out.data(), x.size()), xdev::error);
  EXPECT_THROW(host::convert(serial, DType::f32, x.data(), static_cast<DType>(200), out.data(), x.size()), xdev::error);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](double v) { return v == 7.0; }));
  EXPECT_NO_THROW(host::convert(serial, DType::f16, nullptr, DType::i64, nullptr, 0));
}

// ---------------------------------------------------------------------------------------------
// rng

template <class T>
void check_rng(bool normal) {
  Pool pool(4);
  for (auto a : {xdev::RngAlgorithm::philox, xdev::RngAlgorithm::three_fry}) {
    for (std::uint64_t offset : {0ull, 1ull, 3ull, 1000001ull}) {
      constexpr std::size_t n = 300001;
      std::vector<T> par_out(n), expected(n);
      host::rng(pool.par, par_out.data(), n, a, 1234, offset, normal, T(2), T(3));
      if (normal)
        xdev::random::fill_normal(a, 1234, offset, std::span<T>(expected), T(2), T(3));
      else
        xdev::random::fill_uniform(a, 1234, offset, std::span<T>(expected));
      ASSERT_TRUE(same_bytes(par_out, expected)) << "offset " << offset;
      std::vector<T> ser(n);
      host::rng(serial, ser.data(), n, a, 1234, offset, normal, T(2), T(3));
      ASSERT_TRUE(same_bytes(ser, expected));
    }
  }
}

TEST(HostRng, ParallelChunksEqualTheSerialStream) {
  check_rng<float>(false);
  check_rng<float>(true);
  check_rng<double>(false);
  check_rng<double>(true);
}

TEST(HostRng, InvalidArgumentsFailBeforeWriting) {
  Pool pool(2);
  std::vector<float> out(200000, 5.0f);
  EXPECT_THROW(host::rng(pool.par, out.data(), out.size(), xdev::RngAlgorithm::philox, 1, 0, true, 0.0f, -1.0f),
               xdev::error);
  EXPECT_THROW(host::rng(pool.par, out.data(), out.size(), static_cast<xdev::RngAlgorithm>(9), 1, 0, false, 0.0f, 1.0f),
               xdev::error);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == 5.0f; }));
}

}  // namespace
