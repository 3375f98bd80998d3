// Conformance: every file of ${KERNRT_SHARED_DIR}/corpus gets exactly the verdict that
// corpus/EXPECTED.md lists, read from the table itself so a new corpus file without a
// verdict (or a verdict without a file) fails too.
//
// How each verdict is checked: `verified` / `rejected` -> verify_json of the file as a
// whole manifest; `verified as a fragment` -> parse_fragment + verify_fragment with each
// var the fragment names at max 1 and again at the model profile (tokens 2048, seqs 128);
// `a call` -> the object parses as the only call of a program (the fragment merge that
// binds it is verified by tools/gen's merge test). A missing corpus fails, never skips.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/protocol.hpp"
#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(KERNRT_SHARED_DIR) / "corpus";

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  const size_t b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// file -> verdict column of EXPECTED.md's table.
std::map<std::string, std::string> expected_verdicts() {
  std::map<std::string, std::string> out;
  std::istringstream in(slurp(kCorpus / "EXPECTED.md"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    std::string cell;
    while (std::getline(row, cell, '|')) cells.push_back(trim(cell));
    if (cells.size() < 2 || cells[0] == "file" || cells[0].rfind("---", 0) == 0) continue;
    out[cells[0]] = cells[1];
  }
  return out;
}

std::map<std::string, Var> fragment_vars(uint64_t tokens, uint64_t seqs) {
  return {{"tokens", Var{tokens}}, {"seqs", Var{seqs}}};
}

// The call binding example as the only call of an otherwise empty program.
Result<Manifest> wrap_call(const std::string& call_text) {
  Json wrapped = Json::parse(R"({"schema_version": 4, "model": "wrap", "buffers": {}, "modules": {},
                                 "ops": {}, "programs": {"p": {"calls": []}}})");
  wrapped[JsonPtr("/programs/p/calls")].push_back(Json::parse(call_text));
  return parse_manifest(wrapped.dump());
}

void check_one(const std::string& file, const std::string& verdict) {
  SCOPED_TRACE(file + " expected " + verdict);
  const std::string text = slurp(kCorpus / file);
  if (verdict.rfind("verified as a fragment", 0) == 0) {
    Result<Fragment> f = parse_fragment(text);
    ASSERT_TRUE(f.value.has_value()) << listing(f.errors);
    Errors at_one = verify_fragment(*f.value, fragment_vars(1, 1));
    EXPECT_TRUE(at_one.empty()) << listing(at_one);
    Errors at_profile = verify_fragment(*f.value, fragment_vars(2048, 128));
    EXPECT_TRUE(at_profile.empty()) << listing(at_profile);
  } else if (verdict.rfind("verified", 0) == 0) {
    Result<Verified> v = verify_json(text);
    EXPECT_TRUE(v.value.has_value()) << listing(v.errors);
  } else if (verdict.rfind("rejected", 0) == 0) {
    Result<Verified> v = verify_json(text);
    EXPECT_FALSE(v.value.has_value());
    EXPECT_FALSE(v.errors.empty());
  } else if (verdict == "a call") {
    Result<Manifest> m = wrap_call(text);
    ASSERT_TRUE(m.value.has_value()) << listing(m.errors);
    ASSERT_EQ(m.value->programs.at("p").calls.size(), 1u);
  } else {
    ADD_FAILURE() << "EXPECTED.md verdict not understood: " << verdict;
  }
}

TEST(Corpus, EveryFileGetsItsExpectedVerdict) {
  ASSERT_TRUE(fs::is_directory(kCorpus))
      << "corpus not found at " << kCorpus << ": check out the shared folder beside the clone";
  const auto verdicts = expected_verdicts();
  ASSERT_GE(verdicts.size(), 10u) << "EXPECTED.md table not found or too short";
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kCorpus)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    const std::string rel = fs::relative(entry.path(), kCorpus).generic_string();
    ++files;
    auto it = verdicts.find(rel);
    if (it == verdicts.end()) {
      ADD_FAILURE() << rel << " has no verdict in EXPECTED.md";
      continue;
    }
    check_one(rel, it->second);
  }
  EXPECT_EQ(files, verdicts.size()) << "EXPECTED.md lists a file the corpus does not have";
}

Result<Protocol> protocol_of_file(const std::string& file) {
  Result<Verified> v = verify_json(slurp(kCorpus / file));
  EXPECT_TRUE(v.value.has_value()) << file << listing(v.errors);
  if (!v.value) return Result<Protocol>::fail(v.errors);
  return check_protocol(*v.value);
}

TEST(Corpus, MinimalDoesNotFitTheProtocol) {
  Result<Protocol> p = protocol_of_file("kern/minimal.json");
  ASSERT_EQ(p.errors.size(), 2u) << listing(p.errors);
  EXPECT_EQ(p.errors[0].message, "no input has fill `slot`");
  EXPECT_EQ(p.errors[1].message, "no input has fill `seq_len`");
}

TEST(Corpus, PlainFitsTheProtocol) {
  Result<Protocol> p = protocol_of_file("kern/plain.json");
  ASSERT_TRUE(p.value.has_value()) << listing(p.errors);
  EXPECT_EQ(p.value->rows.name, "tokens");
  EXPECT_EQ(p.value->groups.name, "seqs");
  EXPECT_EQ(p.value->forwards.size(), 3u);
}

TEST(Corpus, TrayFitsWithTrayVarRows) {
  Result<Protocol> p = protocol_of_file("kern/tray.json");
  ASSERT_TRUE(p.value.has_value()) << listing(p.errors);
  ASSERT_TRUE(p.value->tray.has_value());
  EXPECT_EQ(p.value->tray->name, "rows");
  EXPECT_EQ(p.value->once, std::vector<std::string>{"tp_init"});
}

TEST(Corpus, MoeLayersVerifyWithoutFills) {
  for (const char* f : {"kern/k3-moe-l1-ep1.json", "kern/k3-moe-l1-ep4.json"}) {
    Result<Protocol> p = protocol_of_file(f);
    EXPECT_FALSE(p.value.has_value()) << f;
  }
}

TEST(Corpus, LegacyTensormapParamIsInvalidParamType) {
  Result<Verified> v = verify_json(slurp(kCorpus / "kern/k3-moe-l1-ep1.legacy-tensormap-param.json"));
  ASSERT_EQ(v.errors.size(), 1u) << listing(v.errors);
  EXPECT_NE(v.errors[0].message.find("invalid param type `tensormap`"), std::string::npos)
      << v.errors[0].to_string();
}

TEST(Corpus, CallBindingSelectsKvSlotOne) {
  Result<Manifest> m = wrap_call(slurp(kCorpus / "seed/call-binding-example.json"));
  ASSERT_TRUE(m.value.has_value()) << listing(m.errors);
  const Call& call = m.value->programs.at("p").calls.at(0);
  EXPECT_EQ(call.op, "attn_decode");
  ASSERT_EQ(call.args.size(), 9u);
  const auto* k = std::get_if<StateArg>(&call.args[2]);
  const auto* v = std::get_if<StateArg>(&call.args[3]);
  ASSERT_TRUE(k != nullptr && v != nullptr);
  EXPECT_EQ(k->offset, std::optional<uint64_t>(262144));
  EXPECT_EQ(v->offset, std::optional<uint64_t>(262656));
}

}  // namespace
}  // namespace kernrt::manifest::testing
