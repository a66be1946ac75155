#include <xdev/core/dtype.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

namespace {

using ::testing::HasSubstr;
using xdev::DType;

TEST(DType, SizesMatchTheirCxxTypes) {
  EXPECT_EQ(xdev::size_of(DType::bool_), sizeof(bool));
  EXPECT_EQ(xdev::size_of(DType::u8), 1u);
  EXPECT_EQ(xdev::size_of(DType::i32), 4u);
  EXPECT_EQ(xdev::size_of(DType::i64), 8u);
  EXPECT_EQ(xdev::size_of(DType::f16), 2u);
  EXPECT_EQ(xdev::size_of(DType::bf16), 2u);
  EXPECT_EQ(xdev::size_of(DType::f32), sizeof(float));
  EXPECT_EQ(xdev::size_of(DType::f64), sizeof(double));
}

TEST(DType, NamesRoundTripThroughParse) {
  for (DType t : xdev::all_dtypes) EXPECT_EQ(xdev::parse_dtype(xdev::name_of(t)), t) << xdev::name_of(t);
}

TEST(DType, ParsesCommonAliases) {
  EXPECT_EQ(xdev::parse_dtype("float32"), DType::f32);
  EXPECT_EQ(xdev::parse_dtype("double"), DType::f64);
  EXPECT_EQ(xdev::parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(xdev::parse_dtype("half"), DType::f16);
  EXPECT_EQ(xdev::try_parse_dtype("F32"), std::nullopt);  // names are case-sensitive
}

TEST(DType, UnknownNameIsInvalidArgumentNamingTheTextAndTheAcceptedNames) {
  try {
    (void)xdev::parse_dtype("float128");
    FAIL() << "no exception";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("\"float128\""));
    EXPECT_THAT(e.what(), HasSubstr("bf16"));
  }
}

TEST(DType, MapsCxxTypes) {
  static_assert(xdev::dtype_of<float> == DType::f32);
  static_assert(xdev::dtype_of<std::int64_t> == DType::i64);
  static_assert(!xdev::HasDType<char*>);
  std::ostringstream os;
  os << DType::bf16;
  EXPECT_EQ(os.str(), "bf16");
}

TEST(DType, FloatingPointClassification) {
  EXPECT_TRUE(xdev::is_floating_point(DType::bf16));
  EXPECT_FALSE(xdev::is_floating_point(DType::i32));
}

}  // namespace
