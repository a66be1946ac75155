// xdev::spmd::PartitionSpec: construction from literals, the canonical text and parsing it back
// (with the spelling variants a user may type), parse errors that point at the offending
// character, and the spec's own validation (empty or repeated axes).
#include <xdev/spmd/partition_spec.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "support/error_of.hpp"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using xdev::spmd::PartitionSpec;
using xdev::spmd::replicated;
using Dims = std::vector<std::vector<std::string>>;

using xdev_test::expect_error;

// ---- construction -----------------------------------------------------------------------------

TEST(PartitionSpec, LiteralsGiveOneEntryPerDimension) {
  const PartitionSpec s{"data", replicated};
  EXPECT_EQ(s.size(), 2U);
  EXPECT_THAT(s[0], ElementsAre("data"));
  EXPECT_THAT(s[1], IsEmpty());

  const PartitionSpec two{{"data", "model"}, replicated};
  EXPECT_EQ(two.size(), 2U);
  EXPECT_THAT(two[0], ElementsAre("data", "model"));
  EXPECT_THAT(two[1], IsEmpty());

  const PartitionSpec none{};
  EXPECT_EQ(none.size(), 0U);
  EXPECT_TRUE(none.empty());
}

TEST(PartitionSpec, EveryDimSpellingMeansTheSame) {
  const std::string data = "data";
  const std::vector<std::string> both{"data", "model"};
  EXPECT_EQ((PartitionSpec{std::nullopt, "data"}), (PartitionSpec{replicated, data}));
  EXPECT_EQ((PartitionSpec{{}, std::string_view("data")}), (PartitionSpec{replicated, "data"}));
  EXPECT_EQ((PartitionSpec{both}), (PartitionSpec{{"data", "model"}}));
  EXPECT_EQ((PartitionSpec{{"data"}}), (PartitionSpec{"data"}));
  EXPECT_EQ(PartitionSpec(Dims{{"data", "model"}, {}}), (PartitionSpec{{"data", "model"}, replicated}));
  EXPECT_NE((PartitionSpec{"data"}), (PartitionSpec{"data", replicated}));
  EXPECT_NE((PartitionSpec{{"data", "model"}}), (PartitionSpec{"data", "model"}));
}

TEST(PartitionSpec, AxesListsEveryAxisInOrder) {
  const PartitionSpec s{{"x", "y"}, replicated, "z"};
  EXPECT_THAT(s.axes(), ElementsAre("x", "y", "z"));
  EXPECT_TRUE(s.uses("y"));
  EXPECT_FALSE(s.uses("w"));
  EXPECT_THAT(PartitionSpec{}.axes(), IsEmpty());
  EXPECT_EQ(s.dims(), (Dims{{"x", "y"}, {}, {"z"}}));
}

TEST(PartitionSpec, IndexOutOfRangeIsAnError) {
  const PartitionSpec s{"data", replicated};
  expect_error(xdev::errc::invalid_argument, [&] { (void)s[2]; },
               {"dimension 2 is out of range for PartitionSpec ('data', None) of 2 dimensions"});
}

// ---- validation -------------------------------------------------------------------------------

TEST(PartitionSpec, RejectsAnAxisUsedTwice) {
  expect_error(xdev::errc::invalid_argument,
               [] {
                 PartitionSpec{"data", "data"};
               },
               {"axis 'data' is used twice in PartitionSpec ('data', 'data') (in dimensions 0 and 1)"});
  expect_error(xdev::errc::invalid_argument,
               [] {
                 PartitionSpec{{"x", "x"}};
               },
               {"axis 'x' is used twice in PartitionSpec (('x', 'x'),) (both in dimension 0)"});
  expect_error(xdev::errc::invalid_argument,
               [] {
                 PartitionSpec{"x", replicated, {"y", "x"}};
               },
               {"axis 'x' is used twice", "(in dimensions 0 and 2)"});
  expect_error(xdev::errc::invalid_argument, [] { (void)PartitionSpec::parse("('a', ('b', 'a'))"); },
               {"axis 'a' is used twice", "(parsed from \"('a', ('b', 'a'))\")"});
}

TEST(PartitionSpec, RejectsAnEmptyAxisName) {
  expect_error(xdev::errc::invalid_argument,
               [] {
                 PartitionSpec{replicated, ""};
               },
               {"PartitionSpec (None, '') has an empty axis name in dimension 1"});
  expect_error(xdev::errc::invalid_argument, [] { (void)PartitionSpec::parse("(('a', \"\"),)"); },
               {"has an empty axis name in dimension 0", "(parsed from \"(('a', \"\"),)\")"});
}

// ---- printing ---------------------------------------------------------------------------------

TEST(PartitionSpec, PrintsTheCanonicalForm) {
  EXPECT_EQ((PartitionSpec{"data", replicated}).to_string(), "('data', None)");
  EXPECT_EQ((PartitionSpec{{"data", "model"}, replicated}).to_string(), "(('data', 'model'), None)");
  EXPECT_EQ((PartitionSpec{"data"}).to_string(), "('data',)");
  EXPECT_EQ((PartitionSpec{replicated}).to_string(), "(None,)");
  EXPECT_EQ((PartitionSpec{{"x", "y"}}).to_string(), "(('x', 'y'),)");
  EXPECT_EQ(PartitionSpec{}.to_string(), "()");
  EXPECT_EQ((PartitionSpec{replicated, replicated}).to_string(), "(None, None)");
  std::ostringstream os;
  os << PartitionSpec{replicated, "model"};
  EXPECT_EQ(os.str(), "(None, 'model')");
}

TEST(PartitionSpec, QuotesNamesLikePython) {
  EXPECT_EQ((PartitionSpec{"it's"}).to_string(), "(\"it's\",)");
  EXPECT_EQ((PartitionSpec{"say \"hi\""}).to_string(), "('say \"hi\"',)");
  EXPECT_EQ((PartitionSpec{"both'\""}).to_string(), "('both\\'\"',)");
  EXPECT_EQ((PartitionSpec{"back\\slash"}).to_string(), "('back\\\\slash',)");
}

// ---- parsing ----------------------------------------------------------------------------------

TEST(PartitionSpec, ParsesTheCanonicalForms) {
  EXPECT_EQ(PartitionSpec::parse("('data', None)"), (PartitionSpec{"data", replicated}));
  EXPECT_EQ(PartitionSpec::parse("(('data', 'model'), None)"), (PartitionSpec{{"data", "model"}, replicated}));
  EXPECT_EQ(PartitionSpec::parse("('data',)"), (PartitionSpec{"data"}));
  EXPECT_EQ(PartitionSpec::parse("()"), PartitionSpec{});
  EXPECT_EQ(PartitionSpec::parse("(None,)"), (PartitionSpec{replicated}));
  EXPECT_EQ(PartitionSpec::parse("(None, None)"), (PartitionSpec{replicated, replicated}));
}

TEST(PartitionSpec, ParsesSpellingVariants) {
  const PartitionSpec rows{"data", replicated};
  EXPECT_EQ(PartitionSpec::parse("P('data', None)"), rows);
  EXPECT_EQ(PartitionSpec::parse("PartitionSpec('data', None)"), rows);
  EXPECT_EQ(PartitionSpec::parse("(\"data\", None)"), rows);
  EXPECT_EQ(PartitionSpec::parse("('data',None,)"), rows);
  EXPECT_EQ(PartitionSpec::parse("  P ( 'data' ,\n\tNone )  "), rows);
  EXPECT_EQ(PartitionSpec::parse("('data', ())"), rows) << "an empty tuple is a replicated dimension";
  EXPECT_EQ(PartitionSpec::parse("(('data',), None)"), rows) << "a one-name tuple is the name";
  EXPECT_EQ(PartitionSpec::parse("('data')"), (PartitionSpec{"data"})) << "no trailing comma needed";
  EXPECT_EQ(PartitionSpec::parse("P()"), PartitionSpec{});
  EXPECT_EQ(PartitionSpec::parse("( ( 'x' , \"y\" , ) , 'z' )"), (PartitionSpec{{"x", "y"}, "z"}));
  EXPECT_EQ(PartitionSpec::parse("('a b', 'c,d', '(e)')"), (PartitionSpec{"a b", "c,d", "(e)"}));
  EXPECT_EQ(PartitionSpec::parse(R"(('it\'s', "x\"y", 'a\\b'))"), (PartitionSpec{"it's", "x\"y", "a\\b"}));
}

TEST(PartitionSpec, PrintThenParseRoundTrips) {
  const std::vector<PartitionSpec> specs{
      PartitionSpec{},
      PartitionSpec{"data"},
      PartitionSpec{replicated},
      PartitionSpec{"data", replicated},
      PartitionSpec{replicated, "data"},
      PartitionSpec{{"data", "model"}, replicated},
      PartitionSpec{{"data", "model"}},
      PartitionSpec{{"a", "b", "c"}, replicated, "d", replicated},
      PartitionSpec{"it's", "say \"hi\"", "both'\"", "back\\slash"},
  };
  for (const auto& s : specs) EXPECT_EQ(PartitionSpec::parse(s.to_string()), s) << s;
}

TEST(PartitionSpec, RandomSpecsRoundTrip) {
  // Names chosen to stress quoting and the tokenizer: quotes, backslashes, separators, keywords.
  const std::vector<std::string> pool{"data", "model", "x",   "None", "P",  "it's", "\"q\"", "a\\b",
                                      "a,b",  "(p)",   " s ", "'\"",  "\\", "\n",   "tab\t", "é"};
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::string> names = pool;
    std::shuffle(names.begin(), names.end(), rng);
    std::size_t next = 0;
    Dims dims(rng() % 5);
    for (auto& d : dims) {
      const auto n = rng() % 4;  // 0: replicated
      for (std::size_t i = 0; i < n && next < names.size(); ++i) d.push_back(names[next++]);
    }
    const PartitionSpec s(dims);
    EXPECT_EQ(PartitionSpec::parse(s.to_string()), s) << s;
  }
}

// ---- parse errors -----------------------------------------------------------------------------

TEST(PartitionSpec, ParseErrorsNamePositionTextAndExpectation) {
  using xdev::errc;
  const auto parse = [](std::string_view t) { return [t] { (void)PartitionSpec::parse(t); }; };
  expect_error(errc::invalid_argument, parse("('data', Nne)"),
               {"expected a quoted axis name, None or a tuple at position 9 in \"('data', Nne)\", found 'Nne'"});
  expect_error(errc::invalid_argument, parse("'data', None"),
               {"expected '(' opening the spec at position 0 in \"'data', None\""});
  expect_error(errc::invalid_argument, parse("('data' None)"),
               {"expected ',' or ')' after a dimension at position 8 in \"('data' None)\", found 'None'"});
  expect_error(errc::invalid_argument, parse("('data', None) x"),
               {"expected the end of the text after the closing ')' at position 15 in \"('data', None) x\""});
  expect_error(
      errc::invalid_argument, parse("('data"),
      {"expected a closing ' for the axis name that starts at position 1 in \"('data\"", "found the end of the text"});
  expect_error(errc::invalid_argument, parse("(('a' 'b'))"),
               {"expected ',' or ')' after an axis name in a dimension's tuple at position 6 in \"(('a' 'b'))\""});
  expect_error(errc::invalid_argument, parse("((None,))"),
               {"expected a quoted axis name or ')' inside a dimension's tuple at position 2", "found 'None'"});
  expect_error(errc::invalid_argument, parse("("),
               {"expected a quoted axis name, None or a tuple at position 1 in \"(\", found the end of the text"});
  expect_error(errc::invalid_argument, parse(""),
               {"expected '(' opening the spec at position 0 in \"\", found the end of the text"});
  expect_error(errc::invalid_argument, parse("(Nonesuch)"), {"at position 1", "found 'Nonesuch'"});
  expect_error(errc::invalid_argument, parse("Px('a')"), {"expected '(' opening the spec at position 0", "'Px'"});
  expect_error(errc::invalid_argument, parse("('a',,)"),
               {"expected a quoted axis name, None or a tuple at position 5", "found ','"});
  expect_error(errc::invalid_argument, parse("None"), {"expected '(' opening the spec at position 0"});
}

}  // namespace
