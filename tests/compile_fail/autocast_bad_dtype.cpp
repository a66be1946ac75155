// expect: xdev::Autocast<Key, D>: D must be DType::f16, DType::bf16 or DType::f32
// Mistake: autocast to an integer dtype.
#include "complete_backend.hpp"

using Mine = CompleteBackend<xdev::Capabilities<xdev::Autocast<xdev::AutocastKey::npu, xdev::DType::i32>>>;

static_assert(xdev::check_backend<Mine>());
