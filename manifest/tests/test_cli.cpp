// kernrt-verify as a user runs it: the built binary (KERNRT_BINARY_DIR/bin) on good,
// rejected, missing and malformed files; exit codes 0/1/2, the verdict lines, --cubins,
// --fragment/--vars and --json. Inputs are written to a fresh temporary folder.
#include "cli_fixture.hpp"
#include "kernrt/manifest/sha256.hpp"

namespace kernrt::manifest::testing {
namespace {

TEST_F(Cli, VerifiesGoodFileAndReportsProtocolMisfit) {
  const ToolRun r = run(corpus("kern/minimal.json"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("minimal.json: verified; manifest does not fit the serving protocol:\n"
                       "  - /buffers: no input has fill `slot`\n"
                       "  - /buffers: no input has fill `seq_len`\n"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, VerifiesFittingManifest) {
  const ToolRun r = run(corpus("kern/plain.json"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("plain.json: verified; serving protocol: 3 forwards, 6 fills"), std::string::npos)
      << r.out;
}

TEST_F(Cli, RejectsLegacyManifest) {
  const ToolRun r = run(corpus("kern/k3-moe-l1-ep1.legacy-tensormap-param.json"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("manifest failed verification:\n  - /ops/mega_moe/impl/launches/0/params/5"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("invalid param type `tensormap`"), std::string::npos) << r.out;
}

TEST_F(Cli, ListsEveryViolation) {
  Json j = base();
  set(j, "/schema_version", 3);
  set(j, "/ops/lookup/impl/launches/0/block/0", 2048);
  const ToolRun r = run(quoted(write("bad.json", j.dump())));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("  - /schema_version: unsupported schema_version 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  - /ops/lookup/impl/launches/0/block: block [2048, 1, 1]"), std::string::npos)
      << r.out;
}

TEST_F(Cli, MissingFileIsUsageError) {
  const ToolRun r = run(quoted((dir_ / "absent.json").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("absent.json"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(Cli, BadFlagIsUsageError) {
  const ToolRun r = run("--no-such-flag " + corpus("kern/minimal.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

TEST_F(Cli, VarsNeedFragmentMode) {
  const ToolRun r = run("--vars tokens=8 " + corpus("kern/minimal.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--vars requires --fragment"), std::string::npos) << r.err;
}

TEST_F(Cli, RejectsMalformedVars) {
  const ToolRun r = run("--fragment --vars tokens=0 " + corpus("seed/decode-ops.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("must be >= 1, found 0"), std::string::npos) << r.err;
}

TEST_F(Cli, HelpAndVersion) {
  const ToolRun help = run("--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Exit codes: 0 all verified, 1 any rejected, 2 usage or I/O error"),
            std::string::npos);
  const ToolRun version = run("--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_NE(version.out.find("kernrt-verify"), std::string::npos);
}

TEST_F(Cli, RejectsBinaryJunk) {
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk.push_back(static_cast<char>((i * 7919 + 13) & 0xff));
  expect_rejected_input("junk.bin", junk);
}

TEST_F(Cli, RejectsEmptyFile) { expect_rejected_input("empty.json", ""); }

TEST_F(Cli, RejectsTruncatedFile) {
  const std::string text = base().dump();
  expect_rejected_input("truncated.json", text.substr(0, text.size() / 2));
}

TEST_F(Cli, RejectsDeepNesting) {
  expect_rejected_input("deep.json", std::string(200000, '[') + std::string(200000, ']'));
}

TEST_F(Cli, RejectsHugeNumber) {
  Json j = base();
  std::string text = j.dump();
  const std::string from = "\"max\":64";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"max\":1e400");
  expect_rejected_input("huge.json", text);
}

TEST_F(Cli, RejectsNulByte) {
  std::string text = base().dump();
  text.insert(text.find("\"base\"") + 2, std::string(1, '\0'));
  expect_rejected_input("nul.json", text);
}

TEST_F(Cli, RejectsInvalidUtf8) {
  std::string text = base().dump();
  text.replace(text.find("\"base\""), 6, "\"b\xff\xfe\"");
  expect_rejected_input("utf8.json", text);
}

TEST_F(Cli, CubinsWithMatchingHash) {
  const std::string blob = "not really a cubin, but bytes with a hash";
  fs::create_directories(dir_ / "cubins");
  std::ofstream(dir_ / "cubins" / "any-name.bin", std::ios::binary) << blob;
  Json j = base();
  set(j, "/modules/kern/sha256", sha256_hex(blob));
  const ToolRun r = run("--cubins " + quoted((dir_ / "cubins").string()) + " " + quoted(write("m.json", j.dump())));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("m.json: verified"), std::string::npos) << r.out;
}

TEST_F(Cli, CubinsWithMissingHash) {
  fs::create_directories(dir_ / "cubins");
  std::ofstream(dir_ / "cubins" / "other.cubin", std::ios::binary) << "other bytes";
  const std::string f = write("m.json", base().dump());
  const ToolRun r = run("--cubins " + quoted((dir_ / "cubins").string()) + " " + quoted(f));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("/modules/kern/sha256: module `kern` expects sha256 "
                       "`0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef`"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find((dir_ / "cubins").string()), std::string::npos) << r.out;
}

// --cubins reports each module's origin: a file of DIR, or a verified blob of the cache
// (an hf: module after kernrt-fetch); a blob whose bytes changed does not count.
TEST_F(Cli, CubinsReportsWhereEachModuleCameFrom) {
  const std::string local = "local cubin bytes", fetched = "bytes a fetch left in the cache";
  fs::create_directories(dir_ / "cubins");
  fs::create_directories(dir_ / "cache" / "blobs");
  std::ofstream(dir_ / "cubins" / "k.cubin", std::ios::binary) << local;
  std::ofstream(dir_ / "cache" / "blobs" / sha256_hex(fetched), std::ios::binary) << fetched;
  Json j = base();
  set(j, "/modules/kern/sha256", sha256_hex(local));
  set(j, "/modules/hub", Json{{"source", "hf:org/repo/k.cubin@v1"}, {"sha256", sha256_hex(fetched)}});
  set(j, "/ops/lookup/impl/launches/0/module", "hub");
  const std::string args = "--cubins " + quoted((dir_ / "cubins").string()) + " --cache-dir " +
                           quoted((dir_ / "cache").string()) + " " + quoted(write("m.json", j.dump()));
  const ToolRun r = run(args);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("  module `hub`: cache `" + (dir_ / "cache" / "blobs" / sha256_hex(fetched)).string() +
                       "` (hf:org/repo/k.cubin@v1)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  module `kern`: `" + (dir_ / "cubins" / "k.cubin").string() + "`\n"),
            std::string::npos)
      << r.out;
  std::ofstream(dir_ / "cache" / "blobs" / sha256_hex(fetched), std::ios::binary) << "changed";
  const ToolRun changed = run(args);
  EXPECT_EQ(changed.code, 1) << changed.out;
  EXPECT_NE(changed.out.find("/modules/hub/sha256: module `hub` expects sha256"), std::string::npos) << changed.out;
  EXPECT_NE(changed.out.find("fetch it with `kernrt-fetch MANIFEST`"), std::string::npos) << changed.out;
}

TEST_F(Cli, CubinsDirMustExist) {
  const ToolRun r = run("--cubins " + quoted((dir_ / "nowhere").string()) + " " + corpus("kern/minimal.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nowhere"), std::string::npos) << r.err;
}

TEST_F(Cli, VerifiesSeedFragments) {
  const std::string files = corpus("seed/decode-ops.json") + " " + corpus("seed/prefill-ops.json");
  const ToolRun defaults = run("--fragment " + files);
  EXPECT_EQ(defaults.code, 0) << defaults.out << defaults.err;
  EXPECT_NE(defaults.out.find("decode-ops.json: verified (fragment; vars seqs=1)\n"), std::string::npos)
      << defaults.out;
  EXPECT_NE(defaults.out.find("prefill-ops.json: verified (fragment; vars seqs=1, tokens=1)\n"),
            std::string::npos)
      << defaults.out;
  const ToolRun profile = run("--fragment --vars tokens=2048,seqs=128 " + files);
  EXPECT_EQ(profile.code, 0) << profile.out << profile.err;
  EXPECT_NE(profile.out.find("decode-ops.json: verified (fragment; vars seqs=128, tokens=2048)\n"),
            std::string::npos)
      << profile.out;
}

TEST_F(Cli, FragmentLimitsUseGivenVars) {
  const ToolRun r = run("--fragment --vars seqs=70000 " + corpus("seed/decode-ops.json"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("grid.z: 70000 exceeds CUDA limit 65535"), std::string::npos) << r.out;
}

TEST_F(Cli, ManifestIsNotAFragment) {
  const ToolRun r = run("--fragment " + corpus("kern/minimal.json"));
  EXPECT_EQ(r.code, 1) << r.out;
}

TEST_F(Cli, JsonOutputIsOneObjectPerFile) {
  const std::string bad = write("bad.json", "{");
  const ToolRun r = run("--json " + corpus("kern/minimal.json") + " " + corpus("kern/plain.json") + " " +
                    quoted(bad));
  EXPECT_EQ(r.code, 1);
  std::istringstream lines(r.out);
  std::vector<Json> objs;
  for (std::string line; std::getline(lines, line);) {
    Json j = Json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    objs.push_back(j);
  }
  ASSERT_EQ(objs.size(), 3u) << r.out;
  EXPECT_EQ(objs[0].at("verdict"), "verified");
  EXPECT_EQ(objs[0].at("protocol").at("fits"), false);
  EXPECT_EQ(objs[0].at("protocol").at("misfits").at(0).at("message"), "no input has fill `slot`");
  EXPECT_EQ(objs[1].at("protocol").at("fits"), true);
  EXPECT_EQ(objs[1].at("protocol").at("forwards"), 3);
  EXPECT_EQ(objs[2].at("verdict"), "rejected");
  EXPECT_EQ(objs[2].at("file"), bad);
  const Json& e = objs[2].at("errors").at(0);
  for (const char* key : {"path", "message", "line", "column", "kind"}) EXPECT_TRUE(e.contains(key)) << key;
  EXPECT_GE(e.at("line").get<int>(), 1);
}

TEST_F(Cli, MixedFilesExitWithWorstVerdict) {
  const ToolRun r = run(corpus("kern/plain.json") + " " + corpus("kern/replicated.json"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("plain.json: verified"), std::string::npos);
  EXPECT_NE(r.out.find("replicated.json: manifest failed verification:"), std::string::npos);
}

}  // namespace
}  // namespace kernrt::manifest::testing
