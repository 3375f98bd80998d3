// Bounded cost and output that cannot lie (issue 16, items 2 and 4), at the library level:
// at most VerifyOptions::max_errors errors kept and the rest counted, quoted names and
// pointer tokens cut to kShownNameBytes + "…" in the verifier and the parser, and the text
// form of an error escaping what a terminal would interpret. The CLI cases (file limits,
// forged verdict lines) are in test_cli_hostile.cpp.
#include <chrono>

#include "kernrt/manifest/parse.hpp"
#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

const std::string kEllipsis = "\xe2\x80\xa6";

// The base manifest with `n` more i32 fields, all at byte 160 of the mix pack: n - 1 overlaps.
Json overlapping(size_t n) {
  Json j = base();
  Json& fields = j[JsonPtr(std::string(kMixPack) + "/fields")];
  for (size_t i = 0; i < n; ++i) fields.push_back(Json::parse(R"({"at": 160, "i32": 0})"));
  return j;
}

// Renames op `mix` (definition and call) to `name`.
Json renamed_mix(const std::string& name) {
  Json j = base();
  Json op = j["ops"]["mix"];
  j["ops"].erase("mix");
  j["ops"][name] = op;
  j["programs"]["step"]["calls"][1]["op"] = name;
  return j;
}

TEST(BoundedErrors, KeepsTheFirstHundredAndCountsTheRest) {
  Result<Verified> r = verify_json(overlapping(150).dump());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors.size(), 100u);
  EXPECT_EQ(r.errors.size() + r.omitted, 149u) << listing(r.errors);
  EXPECT_NE(r.errors.front().message.find("overlaps field #"), std::string::npos);
}

TEST(BoundedErrors, HonoursTheLimitGiven) {
  VerifyOptions o;
  o.max_errors = 3;
  Result<Verified> r = verify_json(overlapping(10).dump(), o);
  EXPECT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.omitted, 6u);
  o.max_errors = 1000;
  EXPECT_EQ(verify_json(overlapping(10).dump(), o).omitted, 0u);
}

TEST(BoundedErrors, FragmentsAreCappedToo) {
  Json j = overlapping(20);
  Json fragment = {{"modules", j["modules"]}, {"ops", j["ops"]}};
  auto f = parse_fragment(fragment.dump());
  ASSERT_TRUE(f) << listing(f.errors);
  VerifyOptions o;
  o.max_errors = 4;
  uint64_t omitted = 0;
  Errors errs = verify_fragment(*f.value, {{"tokens", Var{64}}}, o, &omitted);
  EXPECT_EQ(errs.size(), 4u);
  EXPECT_EQ(omitted, 15u);
}

TEST(BoundedNames, ShortensALongOpNameInPointersAndMessages) {
  const std::string name(1 << 20, 'o');
  Json j = renamed_mix(name);
  set(j, "/ops/" + name + "/impl/launches/0/block/0", 4096);
  Result<Verified> r = verify_json(j.dump());
  ASSERT_FALSE(r);
  const std::string shown = "/ops/" + std::string(kShownNameBytes, 'o') + kEllipsis + "/impl/launches/0/block";
  bool found = false;
  for (const Error& e : r.errors) {
    EXPECT_LT(e.path.size() + e.message.size(), 1000u) << e.path.substr(0, 200);
    found = found || (e.path == shown && e.message.find("block [4096, 1, 1]") != std::string::npos);
  }
  EXPECT_TRUE(found) << listing(r.errors).substr(0, 2000);
}

TEST(BoundedNames, ShortensLongValuesQuotedInMessages) {
  const std::string sha(1 << 20, 'z');
  Json j = base();
  set(j, "/modules/kern/sha256", sha);
  expect_error(j, "/modules/kern/sha256", "sha256 `" + std::string(kShownNameBytes, 'z') + kEllipsis + "` is not 64 hex chars");
}

TEST(BoundedNames, CutsAtAUtf8Boundary) {
  // 79 ASCII bytes then a 3-byte character: the cut drops the character whole.
  const std::string s = std::string(79, 'a') + "\xe2\x82\xac" + "tail";
  EXPECT_EQ(shortened(s), std::string(79, 'a') + kEllipsis);
  EXPECT_EQ(shortened("short"), "short");
}

TEST(BoundedNames, ParseErrorsShortenKeysInPointerAndMessage) {
  const std::string key(1 << 20, 'k');
  Json j = base();
  j["buffers"]["ids"][key] = 1;
  auto r = parse_manifest(j.dump());
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u);
  const Error& e = r.errors[0];
  EXPECT_LT(e.path.size() + e.message.size(), 1000u);
  EXPECT_EQ(e.path, "/buffers/ids/" + std::string(kShownNameBytes, 'k') + kEllipsis);
  EXPECT_NE(e.message.find("unknown field `" + std::string(kShownNameBytes, 'k') + kEllipsis + "`"),
            std::string::npos)
      << e.message.substr(0, 300);
}

// A syntax error quotes the token last read, which here is 1 MiB of unbalanced quotes:
// the message is cut first, then bounded in one pass (no quadratic search for partners).
TEST(BoundedNames, SyntaxErrorsQuotingHugeTokensStayShortAndFast) {
  for (char q : {'\'', '`'}) {
    const std::string text = "{\"model\": \"" + std::string(1 << 20, q);
    const auto start = std::chrono::steady_clock::now();
    auto r = parse_manifest(text);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
    ASSERT_FALSE(r);
    EXPECT_GE(r.errors.at(0).line, 1u);
    EXPECT_LE(r.errors.at(0).message.size(), 2048u + 3);
  }
}

// The audit's amplification case: a 1 MiB op name and 4,000 overlapping pack fields once
// produced 4 GB of errors. Now: 100 short errors, the other 3,900 overlaps counted.
TEST(BoundedCost, AmplificationCaseStaysSmall) {
  Json j = renamed_mix(std::string(1 << 20, 'x'));
  Json& fields = j["ops"][std::string(1 << 20, 'x')]["impl"]["launches"][0]["args"][3]["pack"]["fields"];
  for (int i = 0; i < 4000; ++i) fields.push_back(Json::parse(R"({"at": 160, "i32": 0})"));
  const std::string text = j.dump();
  ASSERT_GT(text.size(), 2u << 20);
  Result<Verified> r = verify_json(text);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors.size(), 100u);
  EXPECT_EQ(r.errors.size() + r.omitted, 3999u);
  size_t bytes = 0;
  for (const Error& e : r.errors) bytes += e.path.size() + e.message.size();
  EXPECT_LT(bytes, 100u * 400u);
}

// Parsing frees each converted op and call of the DOM; the pointer of a later error is
// still exact, and the owning entry point gives the same result as the viewing one.
TEST(BoundedMemory, ReleasedSubtreesKeepLaterPointersExact) {
  Json j = base();
  set(j, "/programs/step/calls/1/args/3", Json::parse(R"({"i32": "x"})"));
  const std::string text = j.dump();
  auto viewed = parse_manifest(text);
  auto owned = parse_manifest_owned(std::string(text));
  ASSERT_FALSE(viewed);
  ASSERT_FALSE(owned);
  EXPECT_EQ(viewed.errors.at(0).path, "/programs/step/calls/1/args/3/i32");
  EXPECT_EQ(owned.errors.at(0).to_string(), viewed.errors.at(0).to_string());
  auto good = parse_manifest_owned(base().dump());
  ASSERT_TRUE(good) << listing(good.errors);
  EXPECT_EQ(good.value->ops.size(), 2u);
  EXPECT_EQ(good.value->programs.at("step").calls.size(), 2u);
}

TEST(PrintableText, EscapesControlsAndInvisibleFormatCharacters) {
  EXPECT_EQ(printable("plain `name` / 1.5"), "plain `name` / 1.5");
  EXPECT_EQ(printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(printable("\x1b[2K\x07"), "\\x1b[2K\\x07");
  EXPECT_EQ(printable(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(printable("del\x7f"), "del\\x7f");
  EXPECT_EQ(printable("c1 \xc2\x9b"), "c1 \\x9b");                  // U+009B CSI
  EXPECT_EQ(printable("rlo \xe2\x80\xae"), "rlo \\u202e");          // U+202E
  EXPECT_EQ(printable("ls \xe2\x80\xa8"), "ls \\u2028");            // line separator
  EXPECT_EQ(printable("bom \xef\xbb\xbf"), "bom \\ufeff");
  EXPECT_EQ(printable("bad \xff\xc3"), "bad \\xff\\xc3");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x80\xa6"), "caf\xc3\xa9 \xe2\x80\xa6");  // printable UTF-8 kept
}

TEST(PrintableText, ErrorTextEscapesPathAndMessage) {
  Error e{ErrorKind::Manifest, "/ops/a\nb", "op `a\nx.json: verified` is never called", 0, 0};
  EXPECT_EQ(e.to_string(), "/ops/a\\nb: op `a\\nx.json: verified` is never called");
}

TEST(PrintableText, RootErrorsShowTheRootLocation) {
  EXPECT_EQ((Error{ErrorKind::Manifest, "", "no programs declared", 0, 0}).to_string(),
            "/: no programs declared");
  auto r = parse_manifest("[1, 2]");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors.at(0).to_string().rfind("/: ", 0), 0u) << r.errors.at(0).to_string();
  auto missing = parse_manifest(R"({"model": "m"})");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.errors.at(0).to_string().rfind("/: ", 0), 0u) << missing.errors.at(0).to_string();
  // Errors that are not about a document keep their own form.
  EXPECT_EQ((Error{ErrorKind::Driver, "", "no CUDA device", 0, 0}).to_string(), "no CUDA device");
}

}  // namespace
}  // namespace kernrt::manifest::testing
