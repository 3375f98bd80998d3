// The C ABI: status codes per error kind, messages through kernrt_last_error (per
// handle, or per thread for failed loads), option defaults, and null-safety.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <utility>
#include <string>

#include "fixtures.hpp"
#include "kernrt/kernrt.h"
#include "kernrt/runtime.hpp"

namespace kernrt {
namespace {

// The pinned scratch_pair test manifest ("" when the test kernels are not built) and load
// options that find its cubin.
std::string scratch_pair_manifest() {
  const std::string m = std::string(KERNRT_BINARY_DIR) + "/manifests/test/scratch_pair.json";
  return std::filesystem::exists(m) ? m : std::string();
}

kernrt_load_options test_cubin_options() {
  static const char* dirs[] = {KERNRT_CUBIN_DIR};
  kernrt_load_options o;
  kernrt_load_options_init(&o);
  o.cubin_dirs = dirs;
  o.n_cubin_dirs = 1;
  return o;
}

TEST(CApi, OptionsInitSetsDefaults) {
  kernrt_load_options o;
  o.gpu = 5;
  kernrt_load_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof(kernrt_load_options));
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
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find(
                "/topology/groups/ep: topology group `ep` has 4 ranks and this process was given no index"),
            std::string::npos)
      << kernrt_last_error(nullptr);
}

TEST(CApi, RanksReachTheLoadThroughTheOptions) {
  const std::string text = testing::read_text(testing::shared_path("corpus/kern/tray.json"));
  const char* groups[] = {"ep", "tp"};
  const uint64_t indices[] = {3, 1};
  kernrt_load_options o;
  kernrt_load_options_init(&o);
  o.rank_groups = groups;
  o.rank_indices = indices;
  o.n_ranks = 2;
  o.rendezvous = "/tmp/kernrt-unused";
  kernrt_runtime* rt = nullptr;
  // With its ranks, what is left of the tray is its two unsupported externs.
  EXPECT_EQ(kernrt_load_json(text.data(), text.size(), &o, &rt), KERNRT_E_MANIFEST);
  const std::string msg = kernrt_last_error(nullptr);
  EXPECT_EQ(msg.find("/topology"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsupported extern `extern:x`"), std::string::npos) << msg;
  // A caller built against the header before the rank fields: they are not read.
  o.struct_size = offsetof(kernrt_load_options, rank_groups);
  EXPECT_EQ(kernrt_load_json(text.data(), text.size(), &o, &rt), KERNRT_E_CALLER);
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("topology group `ep` has 4 ranks"), std::string::npos);
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
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("/nonexistent/kernrt.json: does not exist"),
            std::string::npos)
      << kernrt_last_error(nullptr);
  EXPECT_EQ(kernrt_load_file(nullptr, nullptr, &rt), KERNRT_E_CALLER);
  EXPECT_EQ(kernrt_run(nullptr, "p", nullptr, nullptr, 0, 0), KERNRT_E_CALLER);
  EXPECT_EQ(kernrt_write_input(nullptr, "q", nullptr, 0), KERNRT_E_CALLER);
  kernrt_destroy(nullptr);
}

TEST(CApi, DeviceAvailabilityAgreesWithCpp) {
  EXPECT_EQ(kernrt_device_available() == 1, device_available(nullptr));
  EXPECT_STREQ(kernrt_version(), KERNRT_VERSION);  // the project version
}


TEST(CApi, StatusStringsNameEveryStatus) {
  EXPECT_STREQ(kernrt_status_string(KERNRT_OK), "ok");
  EXPECT_STREQ(kernrt_status_string(KERNRT_E_PARSE), "parse");
  EXPECT_STREQ(kernrt_status_string(KERNRT_E_MANIFEST), "manifest");
  EXPECT_STREQ(kernrt_status_string(KERNRT_E_ARTIFACT), "artifact");
  EXPECT_STREQ(kernrt_status_string(KERNRT_E_DRIVER), "driver");
  EXPECT_STREQ(kernrt_status_string(KERNRT_E_CALLER), "caller");
  EXPECT_STREQ(kernrt_status_string(KERNRT_E_IO), "io");
  EXPECT_STREQ(kernrt_status_string(KERNRT_E_INTERNAL), "internal");
}

// Every entry point that takes a handle refuses NULL with its own message in the thread's
// record, never a stale one from an earlier load.
TEST(CApi, NullHandleCallsSetTheirOwnMessage) {
  kernrt_runtime* rt = nullptr;
  ASSERT_EQ(kernrt_load_file("/nonexistent/kernrt.json", nullptr, &rt), KERNRT_E_IO);
  struct Call {
    const char* name;
    kernrt_status status;
  };
  uint64_t ptr = 0;
  size_t bytes = 0;
  kernrt_buffer_info info{};
  info.struct_size = sizeof info;
  kernrt_timing timing{};
  const Call calls[] = {
      {"kernrt_run", kernrt_run(nullptr, "p", nullptr, nullptr, 0, 0)},
      {"kernrt_enqueue", kernrt_enqueue(nullptr, "p", nullptr, nullptr, 0, 1, nullptr)},
      {"kernrt_enqueue_bound", kernrt_enqueue_bound(nullptr, "p", nullptr, nullptr, 0, nullptr, 0, nullptr)},
      {"kernrt_synchronize", kernrt_synchronize(nullptr)},
      {"kernrt_write_input", kernrt_write_input(nullptr, "q", nullptr, 0)},
      {"kernrt_write_input_device", kernrt_write_input_device(nullptr, "q", 0, 0, 0, nullptr)},
      {"kernrt_read_output_at", kernrt_read_output_at(nullptr, "o", 0, nullptr, 0)},
      {"kernrt_buffer_device_ptr", kernrt_buffer_device_ptr(nullptr, "q", &ptr, &bytes)},
      {"kernrt_state_device_ptr", kernrt_state_device_ptr(nullptr, "kv", &ptr, &bytes)},
      {"kernrt_get_buffer_info", kernrt_get_buffer_info(nullptr, "q", &info)},
      {"kernrt_time", kernrt_time(nullptr, "p", nullptr, nullptr, 0, 1, 10, &timing)},
  };
  for (const auto& c : calls) {
    EXPECT_EQ(c.status, KERNRT_E_CALLER) << c.name;
  }
  // The record holds the last call's message, which names it.
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("null runtime handle passed to kernrt_time"),
            std::string::npos)
      << kernrt_last_error(nullptr);
  const std::string json = kernrt_last_error_json(nullptr);
  EXPECT_NE(json.find("\"kind\":\"caller\""), std::string::npos) << json;
  EXPECT_EQ(kernrt_buffer_count(nullptr), 0u);
  EXPECT_EQ(kernrt_program_name(nullptr, 0), nullptr);
}

TEST(CApi, LoadResetsTheHandleAndRefusesADirectoryAsIo) {
  testing::TempDir dir;
  kernrt_runtime* rt = reinterpret_cast<kernrt_runtime*>(1);
  EXPECT_EQ(kernrt_load_file(dir.path().c_str(), nullptr, &rt), KERNRT_E_IO);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("is a directory, expected a regular file"),
            std::string::npos)
      << kernrt_last_error(nullptr);
  // A FIFO is refused without blocking (no writer ever opens it).
  const std::string fifo = dir.file("pipe.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(kernrt_load_file(fifo.c_str(), nullptr, &rt), KERNRT_E_IO);
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("is a FIFO, not a regular file"), std::string::npos)
      << kernrt_last_error(nullptr);
  rt = reinterpret_cast<kernrt_runtime*>(1);
  EXPECT_EQ(kernrt_load_file(nullptr, nullptr, &rt), KERNRT_E_CALLER);
  EXPECT_EQ(rt, nullptr);
  kernrt_load_options o;
  kernrt_load_options_init(&o);
  o.struct_size = 8;  // not any version of the struct
  const std::string text = testing::read_text(testing::source_path("examples/decode.json"));
  EXPECT_EQ(kernrt_load_json(text.data(), text.size(), &o, &rt), KERNRT_E_CALLER);
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("struct_size 8"), std::string::npos);
}

// NULL arguments of the calls without a handle: each refusal sets its own message in the
// thread's record (never the older, unrelated load error left there) and resets *out.
TEST(CApi, NullArgumentsSetTheirOwnMessageAndResetOut) {
  auto older_error = [] {
    kernrt_runtime* rt = nullptr;
    ASSERT_EQ(kernrt_load_file("/nonexistent/kernrt.json", nullptr, &rt), KERNRT_E_IO);
  };
  auto last = [] { return std::string(kernrt_last_error(nullptr)); };
  older_error();
  kernrt_runtime* rt = reinterpret_cast<kernrt_runtime*>(1);
  EXPECT_EQ(kernrt_load_json(nullptr, 5, nullptr, &rt), KERNRT_E_CALLER);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(last().find("null manifest text or output handle passed to kernrt_load_json"), std::string::npos)
      << last();
  older_error();
  EXPECT_EQ(kernrt_load_json("{}", 2, nullptr, nullptr), KERNRT_E_CALLER);
  EXPECT_NE(last().find("passed to kernrt_load_json"), std::string::npos) << last();
  older_error();
  EXPECT_EQ(kernrt_load_file("/nonexistent/kernrt.json", nullptr, nullptr), KERNRT_E_CALLER);
  EXPECT_NE(last().find("null manifest path or output handle passed to kernrt_load_file"), std::string::npos)
      << last();
  older_error();
  const char* report = "stale";
  EXPECT_EQ(kernrt_verify_json(nullptr, 5, &report), KERNRT_E_CALLER);
  EXPECT_STREQ(report, "[]");
  EXPECT_NE(last().find("null manifest text passed to kernrt_verify_json"), std::string::npos) << last();
  EXPECT_NE(std::string(kernrt_last_error_json(nullptr)).find("\"kind\":\"caller\""), std::string::npos);
}

// NULL arguments on a live handle: the handle's record names the call, and the next
// successful call clears it. Needs a device to load a runtime at all.
TEST(GpuCApi, NullArgumentsOnAHandleSetItsMessage) {
  if (!device_available(nullptr)) GTEST_SKIP() << "no CUDA device";
  const std::string manifest = scratch_pair_manifest();
  if (manifest.empty()) GTEST_SKIP() << "test kernels not built";
  kernrt_load_options o = test_cubin_options();
  o.token_capacity = 64;
  kernrt_runtime* rt = nullptr;
  ASSERT_EQ(kernrt_load_file(manifest.c_str(), &o, &rt), KERNRT_OK) << kernrt_last_error(nullptr);
  const float data[4] = {1, 2, 3, 4};
  uint64_t ptr = 0;
  size_t bytes = 0;
  const char* names[] = {"n"};
  const std::pair<const char*, std::function<kernrt_status()>> calls[] = {
      {"null argument passed to kernrt_run", [&] { return kernrt_run(rt, nullptr, nullptr, nullptr, 0, 0); }},
      {"null var name or value array passed to kernrt_run",
       [&] { return kernrt_run(rt, "main", names, nullptr, 1, 0); }},
      {"null argument passed to kernrt_write_input",
       [&] { return kernrt_write_input(rt, nullptr, data, sizeof data); }},
      {"null argument passed to kernrt_buffer_device_ptr",
       [&] { return kernrt_buffer_device_ptr(rt, nullptr, &ptr, &bytes); }},
      {"null argument passed to kernrt_get_buffer_info", [&] { return kernrt_get_buffer_info(rt, "x", nullptr); }},
  };
  for (const auto& [needle, call] : calls) {
    EXPECT_EQ(call(), KERNRT_E_CALLER) << needle;
    EXPECT_NE(std::string(kernrt_last_error(rt)).find(needle), std::string::npos) << kernrt_last_error(rt);
  }
  EXPECT_EQ(kernrt_synchronize(rt), KERNRT_OK);
  EXPECT_STREQ(kernrt_last_error(rt), "");
  kernrt_destroy(rt);
}

TEST(CApi, VerifyJsonReportsEveryProblemWithItsPointer) {
  const std::string good = testing::read_text(testing::source_path("examples/decode.json"));
  const char* report = nullptr;
  EXPECT_EQ(kernrt_verify_json(good.data(), good.size(), &report), KERNRT_OK);
  EXPECT_STREQ(report, "[]");
  std::string bad = good;
  const std::string key = "\"schema_version\": 4";
  ASSERT_NE(bad.find(key), std::string::npos);
  bad.replace(bad.find(key), key.size(), "\"schema_version\": 3");
  EXPECT_EQ(kernrt_verify_json(bad.data(), bad.size(), &report), KERNRT_E_MANIFEST);
  const std::string r = report;
  EXPECT_NE(r.find("\"path\":\"/schema_version\""), std::string::npos) << r;
  const std::string junk = "{\"schema_version\": 4,";
  EXPECT_EQ(kernrt_verify_json(junk.data(), junk.size(), &report), KERNRT_E_PARSE);
  EXPECT_NE(std::string(report).find("\"line\""), std::string::npos) << report;
}

// Without a GPU every load that gets as far as the driver says so, and nothing crashes.
TEST(CApi, WithoutADeviceLoadIsADriverStatus) {
  if (device_available(nullptr)) GTEST_SKIP() << "a device is present";
  const std::string manifest = scratch_pair_manifest();
  if (manifest.empty()) GTEST_SKIP() << "test kernels not built";
  kernrt_load_options o = test_cubin_options();
  kernrt_runtime* rt = nullptr;
  EXPECT_EQ(kernrt_load_file(manifest.c_str(), &o, &rt), KERNRT_E_DRIVER);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(std::string(kernrt_last_error(nullptr)).find("no CUDA driver/device"), std::string::npos)
      << kernrt_last_error(nullptr);
}

}  // namespace
}  // namespace kernrt
