// write_input's domain check (domain.hpp) on the CPU: bounds (integers, expressions at the
// vars' maxima, floats incl. bf16 and NaN), `index_into` a buffer, a paged state and a
// per-sequence state (rows from the memory plan), `monotone`, and only the written prefix.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "domain.hpp"
#include "kernrt/manifest/parse.hpp"
#include "memory.hpp"

namespace kernrt {
namespace {

constexpr const char* kManifest = R"({
  "schema_version": 4, "model": "domain-test",
  "vars": {"tokens": {"max": 8}, "seqs": {"max": 4}},
  "states": {"pool": {"bytes_per_token": 4}, "conv": {"bytes_per_seq": 24}},
  "buffers": {
    "seq": {"dtype": "i32", "shape": ["seqs"], "kind": "input", "domain": {"min": 1, "max": "tokens"}},
    "cuq": {"dtype": "i32", "shape": [5], "kind": "input", "domain": {"min": 0, "max": "tokens", "monotone": true}},
    "kv": {"dtype": "bf16", "shape": [10, 8], "kind": "input"},
    "table": {"dtype": "i32", "shape": ["seqs", 4], "kind": "input", "domain": {"index_into": "kv"}},
    "pages": {"dtype": "i64", "shape": ["seqs", 4], "kind": "input", "domain": {"index_into": "pool", "stride": 16}},
    "lines": {"dtype": "i32", "shape": [3, "seqs"], "kind": "input", "domain": {"index_into": "conv", "stride": 8}},
    "scale": {"dtype": "f32", "shape": [2], "kind": "input", "domain": {"min": -1.5, "max": 2.0}},
    "gate": {"dtype": "bf16", "shape": [2], "kind": "input", "domain": {"min": 0.0, "max": 2.0}},
    "out": {"dtype": "f32", "shape": ["tokens"], "kind": "output"}
  },
  "modules": {"m": {"source": "m.cubin", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}},
  "ops": {"f": {"params": ["in buffer<i32>", "out buffer<f32>"],
                "impl": {"launches": [{"module": "m", "entry": "f", "block": [1, 1, 1], "grid": [1, 1, 1]}]}}},
  "programs": {"main": {"calls": [{"op": "f", "args": [{"buf": "seq"}, {"buf": "out"}]}]}}
})";

class Domain : public ::testing::Test {
 protected:
  void SetUp() override {
    auto parsed = manifest::parse_manifest(kManifest);
    ASSERT_TRUE(parsed) << parsed.errors.front().to_string();
    m_ = *parsed.value;
    // 160 tokens = 10 pages of 16; 4 seqs -> 6 slots x 24 bytes = 18 lines of 8 bytes.
    auto plan = rt::plan_memory(m_, 160, 0);
    ASSERT_TRUE(plan);
    plan_ = *plan.value;
  }
  template <class T>
  std::optional<Error> check(const std::string& name, const std::vector<T>& v) {
    return rt::check_domain(m_, plan_, name, v.data(), v.size() * sizeof(T));
  }
  // The one error's message, or "" when the data was accepted.
  template <class T>
  std::string message(const std::string& name, const std::vector<T>& v) {
    auto e = check(name, v);
    if (!e) return "";
    EXPECT_EQ(e->kind, ErrorKind::Caller);
    EXPECT_EQ(e->path, "/buffers/" + name);
    return e->message;
  }
  manifest::Manifest m_;
  rt::MemoryPlan plan_;
};

TEST_F(Domain, BoundsAtTheVarMaxima) {
  EXPECT_EQ(message<int32_t>("seq", {1, 8, 3, 2}), "");
  EXPECT_EQ(message<int32_t>("seq", {1, 2, 0, 2}),
            "input `seq` element 2 = 0 is below the domain min 1");
  EXPECT_EQ(message<int32_t>("seq", {9}), "input `seq` element 0 = 9 is above the domain max 8");
}

TEST_F(Domain, IndexIntoABufferAPagedStateAndAPerSequenceState) {
  EXPECT_EQ(message<int32_t>("table", {0, 9, 3, 3}), "");
  EXPECT_EQ(message<int32_t>("table", {0, 10}),
            "input `table` element 1 = 10 indexes `kv` outside [0, 9]");
  EXPECT_EQ(message<int32_t>("table", {-1}),
            "input `table` element 0 = -1 indexes `kv` outside [0, 9]");
  EXPECT_EQ(message<int64_t>("pages", {9, 0}), "");
  EXPECT_EQ(message<int64_t>("pages", {4, 10}),
            "input `pages` element 1 = 10 indexes `pool` outside [0, 9]");
  EXPECT_EQ(message<int32_t>("lines", {17, 0, 5}), "");
  EXPECT_EQ(message<int32_t>("lines", {1, 18}),
            "input `lines` element 1 = 18 indexes `conv` outside [0, 17]");
}

TEST_F(Domain, Monotone) {
  EXPECT_EQ(message<int32_t>("cuq", {0, 1, 1, 4, 8}), "");
  EXPECT_EQ(message<int32_t>("cuq", {0, 2, 2, 1}),
            "input `cuq` element 3 = 1 is below element 2, but the domain is monotone");
}

TEST_F(Domain, FloatBoundsDecodeTheDtypeAndRejectNan) {
  EXPECT_EQ(message<float>("scale", {-1.5f, 2.0f}), "");
  EXPECT_EQ(message<float>("scale", {0.0f, 2.5f}),
            "input `scale` element 1 = 2.5 is above the domain max 2");
  EXPECT_EQ(message<float>("scale", {NAN}),
            "input `scale` element 0 = nan is below the domain min -1.5");
  const uint16_t one = 0x3f80, three = 0x4040, minus_half = 0xbf00;  // bf16 bit patterns
  EXPECT_EQ(message<uint16_t>("gate", {one, one}), "");
  EXPECT_EQ(message<uint16_t>("gate", {one, three}),
            "input `gate` element 1 = 3 is above the domain max 2");
  EXPECT_EQ(message<uint16_t>("gate", {minus_half}),
            "input `gate` element 0 = -0.5 is below the domain min 0");
}

TEST_F(Domain, OnlyTheWrittenPrefixAndOnlyBuffersWithADomain) {
  const std::vector<int32_t> seq = {2, 3, 0, 0};  // the zeros lie past the written prefix
  EXPECT_FALSE(rt::check_domain(m_, plan_, "seq", seq.data(), 2 * sizeof(int32_t)));
  const std::vector<uint16_t> kv(80, 0xffff);  // NaNs, but `kv` declares no domain
  EXPECT_FALSE(check("kv", kv));
}

}  // namespace
}  // namespace kernrt
