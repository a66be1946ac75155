// The grammar of XDEV_DEVICE (xdev::DeviceFilter): every accepted form, its canonical spelling,
// and every malformed form as an error that quotes the value and says what is wrong.
#include <xdev/any/device_filter.hpp>
#include <xdev/core/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

namespace {

using ::testing::HasSubstr;
using xdev::DeviceFilter;
using xdev::DeviceFilterTerm;

TEST(DeviceFilter, AnEmptyValueMakesEveryDeviceVisible) {
  const auto f = DeviceFilter::parse("");
  EXPECT_TRUE(f.empty());
  EXPECT_FALSE(f.has_inclusions());
  EXPECT_EQ(f.to_string(), "");
}

TEST(DeviceFilter, ANameAloneTakesEveryDeviceOfThatBackend) {
  const auto f = DeviceFilter::parse("opencl");
  ASSERT_EQ(f.terms().size(), 1u);
  EXPECT_EQ(f.terms()[0], (DeviceFilterTerm{.exclude = false, .backend = "opencl", .ordinals = {}}));
  EXPECT_TRUE(f.terms()[0].all_devices());
  EXPECT_TRUE(DeviceFilter::matches(f.terms()[0], "OPENCL")) << "names match ignoring case";
  EXPECT_FALSE(DeviceFilter::matches(f.terms()[0], "OPENCL2"));
  EXPECT_EQ(f.to_string(), "OPENCL");
  EXPECT_EQ(DeviceFilter::parse("OpenCL:*"), DeviceFilter::parse("OpenCL")) << ":* is every device";
}

TEST(DeviceFilter, OrdinalsKeepTheirOrderAndDropRepeats) {
  const auto f = DeviceFilter::parse("host:2,0,2,17");
  ASSERT_EQ(f.terms().size(), 1u);
  EXPECT_EQ(f.terms()[0].ordinals, (std::vector<std::size_t>{2, 0, 17}));
  EXPECT_EQ(f.to_string(), "HOST:2,0,17");
  EXPECT_EQ(DeviceFilter::parse("HOST:007").terms()[0].ordinals, (std::vector<std::size_t>{7}));
  EXPECT_EQ(DeviceFilter::parse("HOST:999999").terms()[0].ordinals[0], DeviceFilter::max_ordinal);
}

TEST(DeviceFilter, TermsSeparatedBySemicolonsWithExclusionsAndStars) {
  const auto f = DeviceFilter::parse("opencl:0,1;host:*;!ref;*:3;!*:0");
  ASSERT_EQ(f.terms().size(), 5u);
  EXPECT_FALSE(f.terms()[0].exclude);
  EXPECT_TRUE(f.terms()[2].exclude);
  EXPECT_EQ(f.terms()[2].backend, "ref");
  EXPECT_TRUE(f.terms()[3].any_backend());
  EXPECT_TRUE(DeviceFilter::matches(f.terms()[3], "ANYTHING"));
  EXPECT_TRUE(f.terms()[4].exclude && f.terms()[4].any_backend());
  EXPECT_TRUE(f.has_inclusions());
  EXPECT_EQ(f.to_string(), "OPENCL:0,1;HOST;!REF;*:3;!*:0");
  EXPECT_EQ(DeviceFilter::parse(f.to_string()).to_string(), f.to_string()) << "the canonical spelling parses back";
  EXPECT_FALSE(DeviceFilter::parse("!REF;!HOST:1").has_inclusions());
}

TEST(DeviceFilter, EveryMalformedFormNamesTheVariableTheValueAndWhatIsWrong) {
  struct Case {
    const char* value;
    const char* problem;
  };
  const Case cases[] = {
      {"../lib", "\"../lib\" is not a backend name in term \"../lib\""},
      {"a b", "\"a b\" is not a backend name"},
      {"_X", "\"_X\" is not a backend name"},
      {"HOST;", "an empty term"},
      {";HOST", "an empty term"},
      {"HOST;;REF", "an empty term"},
      {"!", "no backend name in term \"!\""},
      {"!!HOST", "\"!HOST\" is not a backend name"},
      {":0", "no backend name"},
      {"HOST:", "an empty device list after ':' in term \"HOST:\""},
      {"HOST:1,", "an empty device ordinal"},
      {"HOST:,1", "an empty device ordinal"},
      {"HOST:-1", "\"-1\" is not a device ordinal"},
      {"HOST:*,1", "\"*\" is not a device ordinal (1 to 6 decimal digits, or * alone)"},
      {"HOST:1:2", "\"1:2\" is not a device ordinal"},
      {"HOST:1234567", "\"1234567\" is not a device ordinal"},
      {"HOST: 1", "\" 1\" is not a device ordinal"},
      {"HOST,REF", "\"HOST,REF\" is not a backend name"},
      {"H\xC3\xA9", "is not a backend name"},
      {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "is not a backend name"},
  };
  for (const auto& c : cases) {
    try {
      (void)DeviceFilter::parse(c.value);
      ADD_FAILURE() << "accepted: " << c.value;
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::invalid_argument) << c.value;
      EXPECT_THAT(e.what(), HasSubstr(std::string("XDEV_DEVICE=") + c.value + ": ")) << c.value;
      EXPECT_THAT(e.what(), HasSubstr(c.problem)) << c.value;
      EXPECT_THAT(e.what(), HasSubstr("(accepted: terms separated by ';'")) << c.value;
    }
  }
}

TEST(DeviceFilter, ErrorsNameTheSourceTheyWereGiven) {
  try {
    (void)DeviceFilter::parse("HOST:", "--devices");
    ADD_FAILURE() << "accepted";
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--devices=HOST:: an empty device list"));
  }
}

}  // namespace
