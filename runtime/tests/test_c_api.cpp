// The C ABI: status codes per error kind, messages through kernrt_last_error (per
// handle, or per thread for failed loads), option defaults, and null-safety.
#include <gtest/gtest.h>

#include <string>

#include "fixtures.hpp"
#include "kernrt/kernrt.h"
#include "kernrt/runtime.hpp"

namespace kernrt {
namespace {

TEST(CApi, OptionsInitSetsDefaults) {
  kernrt_load_options o;
  o.gpu = 5;
  kernrt_load_options_init(&o);
  EXPECT_EQ(o.gpu, 0);
  EXPECT_EQ(o.n_cubin_dirs, 0u);
  EXPECT_EQ(o.token_capacity, 0u);
  EXPECT_EQ(o.graph_cache_capacity, 64u);
}

TEST(CApi, ParseErrorIsReportedPerThread) {
  kernrt_runtime* rt = reinterpret_cast<kernrt_runtime*>(1);
  const std::string junk = "{\"schema_version\": 4,";
  EXPECT_EQ(kernrt_load_json(junk.data(), junk.size(), nullptr, &rt), KERNRT_E_PARSE);
  EXPECT_EQ(rt, nullptr);
  EXPECT_STRNE(kernrt_last_error(nullptr), "");
}

TEST(CApi, TopologyRefusalIsCallerStatus) {
  const std::string text = testing::read_text(testing::shared_path("corpus/kern/tray.json"));
  kernrt_runtime* rt = nullptr;
  EXPECT_EQ(kernrt_load_json(text.data(), text.size(), nullptr, &rt), KERNRT_E_CALLER);
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("topology manifests need a rank"),
            std::string::npos)
      << kernrt_last_error(nullptr);
}

TEST(CApi, MissingCubinIsArtifactStatus) {
  testing::TempDir cubins, cache;
  const char* dirs[] = {cubins.path().c_str()};
  kernrt_load_options o;
  kernrt_load_options_init(&o);
  o.cubin_dirs = dirs;
  o.n_cubin_dirs = 1;
  o.cache_dir = cache.path().c_str();
  kernrt_runtime* rt = nullptr;
  const std::string path = testing::source_path("examples/decode.json");
  EXPECT_EQ(kernrt_load_file(path.c_str(), &o, &rt), KERNRT_E_ARTIFACT);
  EXPECT_EQ(rt, nullptr);
  const std::string msg = kernrt_last_error(nullptr);
  EXPECT_EQ(msg.rfind("/modules/fmhaSm100f", 0), 0u) << msg;
  EXPECT_NE(msg.find(cubins.path()), std::string::npos);
}

TEST(CApi, MissingFileIsIoStatusAndNullsAreCallerErrors) {
  kernrt_runtime* rt = nullptr;
  EXPECT_EQ(kernrt_load_file("/nonexistent/kernrt.json", nullptr, &rt), KERNRT_E_IO);
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("cannot open"), std::string::npos);
  EXPECT_EQ(kernrt_load_file(nullptr, nullptr, &rt), KERNRT_E_CALLER);
  EXPECT_EQ(kernrt_run(nullptr, "p", nullptr, nullptr, 0, 0), KERNRT_E_CALLER);
  EXPECT_EQ(kernrt_write_input(nullptr, "q", nullptr, 0), KERNRT_E_CALLER);
  kernrt_destroy(nullptr);
}

TEST(CApi, DeviceAvailabilityAgreesWithCpp) {
  EXPECT_EQ(kernrt_device_available() == 1, device_available(nullptr));
  EXPECT_STREQ(kernrt_version(), KERNRT_VERSION);  // the project version
}

}  // namespace
}  // namespace kernrt
