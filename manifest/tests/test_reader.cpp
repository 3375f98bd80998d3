// The strict JSON reader through parse_manifest: syntax errors with line:column, empty
// input, NUL bytes, invalid UTF-8, non-finite numbers, deep nesting, truncation, binary
// junk and duplicate keys; and the Error text forms. Bad input must fail, never crash.
#include <random>
#include <string>

#include "kernrt/manifest/parse.hpp"
#include "test_core_util.hpp"

namespace {

using core_test::corpus;
using core_test::has_error;
using kernrt::manifest::parse_fragment;
using kernrt::manifest::parse_manifest;

TEST(Reader, RejectsEmptyInput) {
  for (const char* text : {"", "   ", "\n\t \r\n"}) {
    auto r = parse_manifest(text);
    ASSERT_FALSE(r);
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].message, "empty input");
    EXPECT_EQ(r.errors[0].kind, kernrt::ErrorKind::Parse);
    EXPECT_GE(r.errors[0].line, 1u);
  }
}

TEST(Reader, RejectsNulByteWithPosition) {
  std::string text = "{\n \"model\": \"a";
  text.push_back('\0');
  text += "\"}";
  auto r = parse_manifest(text);
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("NUL byte"), std::string::npos);
  EXPECT_EQ(r.errors[0].line, 2u);
  EXPECT_EQ(r.errors[0].column, 13u);
}

TEST(Reader, RejectsInvalidUtf8) {
  const char* bad[] = {"\xff", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\x80"};
  for (const char* b : bad) {
    std::string text = std::string("{\"model\": \"") + b + "\"}";
    auto r = parse_manifest(text);
    ASSERT_FALSE(r);
    EXPECT_NE(r.errors[0].message.find("invalid utf-8"), std::string::npos) << r.errors[0].to_string();
    EXPECT_EQ(r.errors[0].line, 1u);
    EXPECT_EQ(r.errors[0].column, 12u);
  }
}

TEST(Reader, AcceptsValidMultibyteUtf8) {
  auto j = core_test::base();
  j["model"] = "mod\xc3\xa8le \xe2\x82\xac \xf0\x9f\x98\x80";
  auto r = parse_manifest(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  EXPECT_EQ(r.value->model, "mod\xc3\xa8le \xe2\x82\xac \xf0\x9f\x98\x80");
}

TEST(Reader, SyntaxErrorHasLineAndColumn) {
  auto r = parse_manifest("{\n \"schema_version\": 4,\n \"model\": tru\n}");
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 3u);
  EXPECT_GT(r.errors[0].column, 10u);
  EXPECT_NE(r.errors[0].message.find("invalid json"), std::string::npos);
  EXPECT_EQ(r.errors[0].to_string().rfind("3:", 0), 0u) << r.errors[0].to_string();
}

TEST(Reader, RejectsTrailingGarbage) {
  auto j = core_test::base();
  auto r = parse_manifest(j.dump() + " x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("invalid json"), std::string::npos);
}

TEST(Reader, RejectsNonFiniteNumbers) {
  for (const char* num : {"1e400", "-1e400"}) {
    std::string text = core_test::base().dump();
    std::string needle = "\"max\":64";
    auto at = text.find(needle);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, needle.size(), std::string("\"max\":") + num);
    auto r = parse_manifest(text);
    ASSERT_FALSE(r);
    EXPECT_NE(r.errors[0].message.find("not finite"), std::string::npos) << r.errors[0].to_string();
    EXPECT_EQ(r.errors[0].line, 1u);
  }
}

TEST(Reader, RejectsDeepNesting200k) {
  const std::size_t depth = 200000;
  std::string arrays(depth, '[');
  arrays += std::string(depth, ']');
  auto r = parse_manifest(arrays);
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("nesting deeper than 128"), std::string::npos);

  std::string objects;
  for (std::size_t i = 0; i < depth; ++i) objects += "{\"a\":";
  objects += "1";
  objects += std::string(depth, '}');
  auto r2 = parse_manifest(objects);
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.errors[0].message.find("nesting deeper than 128"), std::string::npos);
  EXPECT_EQ(r2.errors[0].path.substr(0, 6), "/a/a/a");

  // Deep nesting inside an expression, the one recursive schema position.
  std::string expr;
  for (int i = 0; i < 5000; ++i) expr += "{\"mul\": [";
  expr += "\"tokens\"";
  for (int i = 0; i < 5000; ++i) expr += ", 2]}";
  auto j = core_test::base();
  std::string text = j.dump();
  std::string needle = "\"shared_mem\":1024";
  text.replace(text.find(needle), needle.size(), "\"shared_mem\":" + expr);
  auto r3 = parse_manifest(text);
  ASSERT_FALSE(r3);
  EXPECT_NE(r3.errors[0].message.find("nesting deeper"), std::string::npos);
}

TEST(Reader, EveryTruncationFailsCleanly) {
  std::string text = corpus("kern/minimal.json");
  ASSERT_TRUE(parse_manifest(text));
  std::size_t last = text.find_last_not_of(" \n");
  for (std::size_t n = 0; n <= last; ++n) {
    auto r = parse_manifest(std::string_view(text).substr(0, n));
    ASSERT_FALSE(r) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_GE(r.errors[0].line, 1u) << n;
  }
}

TEST(Reader, BinaryJunkFailsCleanly) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 500; ++round) {
    std::string junk(static_cast<std::size_t>(rng() % 300), '\0');
    for (char& c : junk) c = static_cast<char>(rng() & 0xFF);
    if (round % 2 == 0 && !junk.empty()) junk[0] = '{';
    auto r = parse_manifest(junk);
    EXPECT_FALSE(r);
    EXPECT_EQ(r.errors.size(), 1u);
    auto f = parse_fragment(junk);
    EXPECT_FALSE(f);
  }
}

TEST(Reader, RejectsDuplicateKeyInMap) {
  auto r = parse_manifest(R"({"schema_version": 4, "model": "m",
    "vars": {"t": {"max": 1}, "t": {"max": 2}},
    "buffers": {}, "modules": {}, "ops": {}, "programs": {}})");
  EXPECT_TRUE(has_error(r.errors, "/vars/t", "duplicate name `t`"));
}

TEST(Reader, RejectsDuplicateKeyInObject) {
  auto r = parse_manifest(R"({"schema_version": 4, "model": "m",
    "vars": {"t": {"max": 1, "max": 2}},
    "buffers": {}, "modules": {}, "ops": {}, "programs": {}})");
  EXPECT_TRUE(has_error(r.errors, "/vars/t/max", "duplicate name `max`"));
}

TEST(Reader, RejectsDuplicateKeyInsideArrays) {
  auto r = parse_manifest(R"({"schema_version": 4, "model": "m", "buffers": {}, "modules": {},
    "ops": {}, "programs": {"p": {"calls": [{"op": "a", "args": []},
      {"op": "b", "args": [{"buf": "x"}, {"buf": "y", "buf": "z"}]}]}}})");
  EXPECT_TRUE(has_error(r.errors, "/programs/p/calls/1/args/1/buf", "duplicate name `buf`"));
}

TEST(Reader, RejectsDuplicateTopLevelKey) {
  auto r = parse_manifest(R"({"schema_version": 4, "schema_version": 4})");
  EXPECT_TRUE(has_error(r.errors, "/schema_version", "duplicate name `schema_version`"));
}

TEST(Reader, MessagesStayValidUtf8) {
  // nlohmann's "last read" token can end mid-character; a long string is shortened.
  auto r = parse_manifest("{\"model\": \xc3\xa9}");
  ASSERT_FALSE(r);
  EXPECT_NO_THROW((void)core_test::Json(r.errors[0].message).dump()) << r.errors[0].message;
  std::string long_name;
  for (int i = 0; i < 70; ++i) long_name += "\xc3\xa9";
  auto j = core_test::base();
  j["schema_version"] = long_name;
  auto r2 = parse_manifest(j.dump());
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.errors[0].message.find("..."), std::string::npos);
  EXPECT_NO_THROW((void)core_test::Json(r2.errors[0].message).dump()) << r2.errors[0].message;
}

TEST(ErrorText, FormatsPathLineAndBareMessage) {
  kernrt::Error e;
  e.path = "/ops/x/impl";
  e.message = "boom";
  EXPECT_EQ(e.to_string(), "/ops/x/impl: boom");
  e.line = 3;
  e.column = 14;
  EXPECT_EQ(e.to_string(), "3:14: boom");
  kernrt::Error root;  // a Manifest error about the whole document shows its location
  root.message = "plain";
  EXPECT_EQ(root.to_string(), "/: plain");
  kernrt::Error bare;
  bare.kind = kernrt::ErrorKind::Io;
  bare.message = "plain";
  EXPECT_EQ(bare.to_string(), "plain");
  EXPECT_STREQ(kernrt::to_string(kernrt::ErrorKind::Artifact), "artifact");
}

TEST(ErrorText, JsonPointerAppendEscapes) {
  EXPECT_EQ(kernrt::json_pointer_append("", "ops"), "/ops");
  EXPECT_EQ(kernrt::json_pointer_append("/ops", "a/b~c"), "/ops/a~1b~0c");
  EXPECT_EQ(kernrt::json_pointer_append("/x", uint64_t{12}), "/x/12");
  EXPECT_EQ(kernrt::json_pointer_append("/x", ""), "/x/");
}

}  // namespace
