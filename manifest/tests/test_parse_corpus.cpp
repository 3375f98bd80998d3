// Parses every corpus manifest and fragment (corpus/EXPECTED.md): the v4 files and seed
// fragments parse; the v5 file and the early-v4 tensormap-param file are rejected with
// the expected path and message.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "kernrt/manifest/parse.hpp"

namespace {

using kernrt::manifest::parse_fragment;
using kernrt::manifest::parse_manifest;

std::string read_corpus(const std::string& rel) {
  std::ifstream f(std::string(KERNRT_SHARED_DIR) + "/corpus/" + rel, std::ios::binary);
  EXPECT_TRUE(f.good()) << rel;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string first_error(const kernrt::Errors& errors) {
  return errors.empty() ? std::string("(no error)") : errors.front().to_string();
}

class CorpusParses : public ::testing::TestWithParam<const char*> {};

TEST_P(CorpusParses, ParsesWithoutError) {
  auto r = parse_manifest(read_corpus(GetParam()));
  ASSERT_TRUE(r) << first_error(r.errors);
  EXPECT_EQ(r.value->schema_version, 4u);
  EXPECT_FALSE(r.value->ops.empty());
}

INSTANTIATE_TEST_SUITE_P(Kern, CorpusParses,
                         ::testing::Values("kern/minimal.json", "kern/plain.json", "kern/tray.json",
                                           "kern/k3-moe-l1-ep1.json", "kern/k3-moe-l1-ep4.json"));

TEST(CorpusParse, MinimalHasItsDeclarations) {
  auto r = parse_manifest(read_corpus("kern/minimal.json"));
  ASSERT_TRUE(r) << first_error(r.errors);
  const auto& m = *r.value;
  EXPECT_EQ(m.model, "toy");
  EXPECT_EQ(m.vars.at("tokens").max, 1024u);
  EXPECT_EQ(m.states.at("kv").bytes_per_token, 256u);
  ASSERT_EQ(m.buffers.size(), 3u);
  EXPECT_EQ(m.buffers.at("x").shape[0].var, "tokens");
  EXPECT_EQ(m.buffers.at("x").shape[1].value, 64u);
  const auto& op = m.ops.at("scale");
  ASSERT_EQ(op.params.size(), 5u);
  EXPECT_EQ(op.params[3].to_string(), "inout state");
  ASSERT_EQ(op.impl.launches.size(), 1u);
  EXPECT_EQ(op.impl.launches[0].block[0], 64u);
  EXPECT_EQ(m.programs.at("step").calls[0].args.size(), 5u);
}

TEST(CorpusParse, PlainExternLaunchesHaveNoModule) {
  auto r = parse_manifest(read_corpus("kern/plain.json"));
  ASSERT_TRUE(r) << first_error(r.errors);
  const auto& l = r.value->ops.at("write").impl.launches.at(0);
  EXPECT_TRUE(l.is_extern);
  EXPECT_FALSE(l.module.has_value());
  EXPECT_EQ(r.value->buffers.at("block_table").domain->stride.value_or(0), 16u);
}

TEST(CorpusParse, RejectsLegacyTensormapParam) {
  auto r = parse_manifest(read_corpus("kern/k3-moe-l1-ep1.legacy-tensormap-param.json"));
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("invalid param type `tensormap`"), std::string::npos)
      << r.errors[0].to_string();
  EXPECT_EQ(r.errors[0].path.rfind("/ops/", 0), 0u) << r.errors[0].path;
}

TEST(CorpusParse, RejectsSchemaFiveReplicated) {
  auto r = parse_manifest(read_corpus("kern/replicated.json"));
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].kind, kernrt::ErrorKind::Parse);
  // A v5-only key or value; either way the message names what the v4 reader refused.
  const std::string& msg = r.errors[0].message;
  EXPECT_TRUE(msg.find("unknown field") != std::string::npos ||
              msg.find("unknown fill `valid`") != std::string::npos)
      << r.errors[0].to_string();
}

class SeedFragments : public ::testing::TestWithParam<const char*> {};

TEST_P(SeedFragments, ParseAsFragment) {
  auto r = parse_fragment(read_corpus(GetParam()));
  ASSERT_TRUE(r) << first_error(r.errors);
  EXPECT_EQ(r.value->modules.size(), 1u);
  ASSERT_FALSE(r.value->ops.empty());
  const auto& op = r.value->ops.begin()->second;
  ASSERT_FALSE(op.impl.launches.empty());
  ASSERT_TRUE(op.impl.launches[0].params.has_value());
  EXPECT_EQ(op.impl.launches[0].params->at(0).to_string(), "bytes<1280>");
}

INSTANTIATE_TEST_SUITE_P(Seed, SeedFragments,
                         ::testing::Values("seed/decode-ops.json", "seed/prefill-ops.json"));

}  // namespace
