#include <xdev/core/shape.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using ::testing::HasSubstr;

TEST(Shape, RankNumelAndPrinting) {
  xdev::Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3u);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s[-1], 4);
  EXPECT_EQ(to_string(s), "[2, 3, 4]");
  EXPECT_EQ(xdev::to_string(xdev::Shape{}), "[]");  // qualified lookup finds it too
  EXPECT_EQ(xdev::Shape{}.numel(), 1);              // a scalar has one element
  EXPECT_TRUE((xdev::Shape{0, 5}.empty()));
}

TEST(Shape, Equality) {
  EXPECT_EQ((xdev::Shape{2, 3}), (xdev::Shape{2, 3}));
  EXPECT_NE((xdev::Shape{2, 3}), (xdev::Shape{3, 2}));
  EXPECT_NE((xdev::Shape{2}), (xdev::Shape{2, 1}));
}

TEST(Shape, UsableAtCompileTime) {
  constexpr xdev::Shape s{4, 5};
  static_assert(s.numel() == 20 && s.rank() == 2);
}

TEST(Shape, RejectsNegativeExtentNamingIt) {
  try {
    xdev::Shape s{2, -3};
    FAIL() << to_string(s);
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("-3"));
    EXPECT_THAT(e.what(), HasSubstr("dimension 1"));
  }
}

TEST(Shape, RejectsTooManyDimensions) {
  EXPECT_THROW((xdev::Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}), xdev::error);
}

TEST(Shape, OutOfRangeDimensionIsAnError) {
  xdev::Shape s{2, 3};
  EXPECT_THROW((void)s[2], xdev::error);
  EXPECT_THROW((void)s[-3], xdev::error);
}

}  // namespace
