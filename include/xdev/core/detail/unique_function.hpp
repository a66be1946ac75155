/// \file
/// A move-only type-erased callable (C++23's std::move_only_function, reduced to what xdev needs).
#pragma once

#include <xdev/core/detail/block_pool.hpp>

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace xdev::detail {

template <class Signature>
class unique_function;

/// Move-only callable wrapper. Small callables (up to three pointers, nothrow-movable) are stored
/// inline so the common submission path does not allocate for them; larger ones in a block of the
/// recycling pool (`block_pool`).
template <class R, class... Args>
class unique_function<R(Args...)> {
  static constexpr std::size_t inline_size = 3 * sizeof(void*);

  struct vtable {
    R (*invoke)(void*, Args&&...);
    void (*move)(void* from, void* to) noexcept;
    void (*destroy)(void*) noexcept;
  };

  template <class F>
  static constexpr bool stored_inline =
      sizeof(F) <= inline_size && alignof(F) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<F>;

  template <class F>
  static F* target(void* storage) noexcept {
    if constexpr (stored_inline<F>)
      return std::launder(static_cast<F*>(storage));
    else
      return *static_cast<F**>(storage);
  }

  template <class F>
  static constexpr vtable vtable_for{
      [](void* s, Args&&... args) -> R { return (*target<F>(s))(std::forward<Args>(args)...); },
      [](void* from, void* to) noexcept {
        if constexpr (stored_inline<F>) {
          ::new (to) F(std::move(*target<F>(from)));
          target<F>(from)->~F();
        } else {
          *static_cast<F**>(to) = *static_cast<F**>(from);
        }
      },
      [](void* s) noexcept {
        if constexpr (stored_inline<F>) {
          target<F>(s)->~F();
        } else {
          F* f = target<F>(s);
          f->~F();
          pool_allocator<F>{}.deallocate(f, 1);
        }
      }};

  // A callable too large for the inline buffer lives in a block of the recycling pool: the
  // submission path hands such callables across threads (built on one, dropped on another).
  template <class D, class F>
  static D* make_boxed(F&& f) {
    pool_allocator<D> a;
    D* p = a.allocate(1);
    try {
      return ::new (static_cast<void*>(p)) D(std::forward<F>(f));
    } catch (...) {
      a.deallocate(p, 1);
      throw;
    }
  }

 public:
  unique_function() noexcept = default;
  unique_function(std::nullptr_t) noexcept {}

  template <class F>
  requires(!std::is_same_v<std::decay_t<F>, unique_function> && std::is_invocable_r_v<R, std::decay_t<F>&, Args...>)
      unique_function(F&& f) {  // NOLINT(google-explicit-constructor): mirrors std::function
    using D = std::decay_t<F>;
    if constexpr (stored_inline<D>)
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
    else
      *reinterpret_cast<D**>(storage_) = make_boxed<D>(std::forward<F>(f));
    vt_ = &vtable_for<D>;
  }

  unique_function(unique_function&& other) noexcept : vt_(other.vt_) {
    if (vt_) {
      vt_->move(other.storage_, storage_);
      other.vt_ = nullptr;
    }
  }

  unique_function& operator=(unique_function&& other) noexcept {
    if (this != &other) {
      reset();
      if (other.vt_) {
        other.vt_->move(other.storage_, storage_);
        vt_ = std::exchange(other.vt_, nullptr);
      }
    }
    return *this;
  }

  unique_function(const unique_function&) = delete;
  unique_function& operator=(const unique_function&) = delete;
  ~unique_function() { reset(); }

  explicit operator bool() const noexcept { return vt_ != nullptr; }

  R operator()(Args... args) { return vt_->invoke(storage_, std::forward<Args>(args)...); }

 private:
  void reset() noexcept {
    if (vt_) std::exchange(vt_, nullptr)->destroy(storage_);
  }

  alignas(std::max_align_t) std::byte storage_[inline_size];
  const vtable* vt_ = nullptr;
};

}  // namespace xdev::detail
