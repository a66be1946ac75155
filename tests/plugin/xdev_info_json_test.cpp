// xdev-info --json, run as a script would: one JSON document with the search path, every plugin
// file and its status, the backends with their devices and capabilities, the default backend and
// the requested ones; the exit status unchanged.
#include "plugin_test_support.hpp"

#include <boost/json/src.hpp>  // Boost.JSON, header-only: in this file only

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

namespace json = boost::json;

struct InfoRun {
  json::value doc;
  int status = -1;
};

// Runs `env xdev-info --json args`, stderr discarded.
InfoRun xdev_info_json([[maybe_unused]] const std::string& env, [[maybe_unused]] const std::string& args) {
  InfoRun r;
#ifdef XDEV_INFO_EXE
  const std::string command = "env " + env + " " XDEV_INFO_EXE " --json " + args + " 2>/dev/null";
  std::FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  std::string out;
  std::array<char, 4096> buf{};
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  const int raw = ::pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  boost::system::error_code ec;
  r.doc = json::parse(out, ec);
  if (ec) ADD_FAILURE() << "not JSON (" << ec.message() << "):\n" << out;
#endif
  return r;
}

const json::object* find_named(const json::value& list, const std::string& name) {
  for (const auto& v : list.as_array())
    if (v.as_object().at("name").as_string() == name) return &v.as_object();
  return nullptr;
}

class XdevInfoJson : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef XDEV_INFO_EXE
    GTEST_SKIP() << "xdev-info is not built";
#endif
  }
};

TEST_F(XdevInfoJson, DescribesTheBackendsDevicesAndPluginsOfTheBuild) {
  const InfoRun r = xdev_info_json("XDEV_PLUGIN_PATH=" XDEV_TEST_PLUGIN_DIR " XDEV_HOST_DEVICES=2", "--backend REF");
  ASSERT_EQ(r.status, 0);
  const auto& doc = r.doc.as_object();
  EXPECT_EQ(doc.at("exit_status").as_int64(), 0);
  EXPECT_TRUE(doc.at("errors").as_array().empty());
  EXPECT_EQ(doc.at("plugin_abi").at("major").as_int64(), XDEV_ABI_MAJOR);

  const auto* host = find_named(doc.at("backends"), "HOST");
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(host->at("builtin").as_bool());
  ASSERT_EQ(host->at("devices").as_array().size(), 2u);
  EXPECT_EQ(host->at("devices").as_array()[1].at("name").as_string(), "HOST:1");
  EXPECT_FALSE(host->at("capabilities").at("dtypes").as_array().empty());

  const auto* ref = find_named(doc.at("backends"), "REF");
  ASSERT_NE(ref, nullptr);
  EXPECT_FALSE(ref->at("builtin").as_bool());
  EXPECT_NE(std::string(ref->at("library").as_string()).find("libxdev_plugin_ref.so"), std::string::npos);
  ASSERT_FALSE(ref->at("devices").as_array().empty());
  const auto& dev = ref->at("devices").as_array()[0].as_object();
  EXPECT_EQ(dev.at("name").as_string(), "REF:0");
  EXPECT_EQ(dev.at("max_inflight").as_int64(), 16);
  EXPECT_TRUE(dev.at("memory").at("limit").is_null() || dev.at("memory").at("limit").is_int64());
  const auto& props = dev.at("properties").as_object();
  EXPECT_EQ(props.at("type").as_string(), "cpu");
  EXPECT_EQ(props.at("name").as_string(), "xdev reference device 0");
  EXPECT_EQ(props.at("vendor").as_string(), "xdev");
  EXPECT_EQ(props.at("compute_units").as_int64(), 1);
  EXPECT_GT(props.at("memory_total").as_int64(), 0);
  EXPECT_TRUE(props.at("memory_free").is_int64());
  EXPECT_TRUE(props.at("host_accessible").as_bool()) << "REF says so (XDEV_PLUGIN_HOST_MEMORY)";
  EXPECT_FALSE(props.at("dtypes").as_array().empty());
  EXPECT_TRUE(host->at("devices").as_array()[0].at("properties").at("host_accessible").as_bool());

  bool ref_file = false;
  for (const auto& p : doc.at("plugins").as_array()) {
    const auto& o = p.as_object();
    if (o.contains("name") && o.at("name").as_string() == "REF") {
      ref_file = true;
      EXPECT_EQ(o.at("status").as_string(), "loaded");
      EXPECT_EQ(o.at("sha256").as_string().size(), 64u);
    }
  }
  EXPECT_TRUE(ref_file) << "the REF plugin file is not listed";
  EXPECT_FALSE(doc.at("search_path").as_array().empty());
  EXPECT_FALSE(doc.at("default_backend").at("name").as_string().empty());
  EXPECT_FALSE(doc.at("default_backend").at("devices").as_array().empty());
  EXPECT_GE(doc.at("visible_devices").as_array().size(), 4u) << "2 HOST and 2 REF devices at least";
  const auto& requested = doc.at("requested").as_array();
  ASSERT_EQ(requested.size(), 1u);
  EXPECT_TRUE(requested[0].at("ok").as_bool());
}

TEST_F(XdevInfoJson, SaysWhyEachFileWasSkippedAndFailsForAMissingBackend) {
  const InfoRun r = xdev_info_json("XDEV_PLUGIN_PATH=" XDEV_TEST_FIXTURE_ROOT "/mixed", "--backend NOPE");
  EXPECT_EQ(r.status, 1);
  const auto& doc = r.doc.as_object();
  EXPECT_EQ(doc.at("exit_status").as_int64(), 1);
  bool not_a_plugin = false, other_abi = false;
  for (const auto& p : doc.at("plugins").as_array()) {
    const std::string status(p.at("status").as_string());
    not_a_plugin = not_a_plugin || status == "not a plugin";
    other_abi = other_abi || status == "other ABI";
    if (status != "loaded") {
      EXPECT_FALSE(p.at("reason").as_string().empty()) << p;
    }
  }
  EXPECT_TRUE(not_a_plugin);
  EXPECT_TRUE(other_abi);
  const auto& requested = doc.at("requested").as_array();
  ASSERT_EQ(requested.size(), 1u);
  EXPECT_FALSE(requested[0].at("ok").as_bool());
  EXPECT_NE(std::string(requested[0].at("error").as_string()).find("NOPE"), std::string::npos);
}

}  // namespace
