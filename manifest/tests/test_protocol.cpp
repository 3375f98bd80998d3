// Serving-protocol check (§2.3): one fitting base, one edit per misfit. Every edited
// manifest still verifies; only check_protocol() objects.
#include "kernrt/manifest/protocol.hpp"
#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

constexpr const char* kServing = R"({
  "schema_version": 4, "model": "serving",
  "vars": {"tokens": {"max": 8}, "seqs": {"max": 4}},
  "states": {"kv": {"bytes_per_token": 64}, "conv": {"bytes_per_seq": 32}},
  "buffers": {
    "token_ids": {"kind": "input", "dtype": "i32", "shape": ["tokens"], "fill": "token"},
    "positions": {"kind": "input", "dtype": "i32", "shape": ["tokens"], "fill": "position"},
    "slots": {"kind": "input", "dtype": "i64", "shape": ["tokens"], "fill": "slot", "domain": {"index_into": "kv"}},
    "seq_lens": {"kind": "input", "dtype": "i32", "shape": ["seqs"], "fill": "seq_len"},
    "cu": {"kind": "input", "dtype": "i32", "shape": [5], "fill": "cu_seqlens"},
    "pages": {"kind": "input", "dtype": "i32", "shape": ["seqs", 4], "domain": {"index_into": "kv", "stride": 16}},
    "lines": {"kind": "input", "dtype": "i32", "shape": [2, "seqs"], "domain": {"index_into": "conv", "stride": 16}},
    "next": {"kind": "output", "dtype": "i32", "shape": ["seqs"], "fill": "tokens"}
  },
  "modules": {},
  "ops": {
    "step": {"params": ["in buffer<i32>", "in buffer<i32>", "in buffer<i64>", "in buffer<i32>", "in buffer<i32>",
                        "in buffer<i32>", "in buffer<i32>", "inout state", "inout state", "out buffer<i32>"],
             "impl": {"launches": [{"entry": "extern:x"}]}}
  },
  "programs": {
    "prefill": {"batch": {"groups": 1, "rows": "tokens"}, "calls": [{"op": "step", "args": [
      {"buf": "token_ids"}, {"buf": "positions"}, {"buf": "slots"}, {"buf": "seq_lens"}, {"buf": "cu"},
      {"buf": "pages"}, {"buf": "lines"}, {"state": "kv"}, {"state": "conv"}, {"buf": "next"}]}]},
    "decode": {"batch": {"groups": 4, "rows": 1}, "calls": [{"op": "step", "args": [
      {"buf": "token_ids"}, {"buf": "positions"}, {"buf": "slots"}, {"buf": "seq_lens"}, {"buf": "cu"},
      {"buf": "pages"}, {"buf": "lines"}, {"state": "kv"}, {"state": "conv"}, {"buf": "next"}]}]}
  }
})";

Json serving(const std::function<void(Json&)>& edit = [](Json&) {}) {
  Json j = Json::parse(kServing);
  edit(j);
  return j;
}

Result<Protocol> protocol_of(const Json& j) {
  Result<Verified> v = verify_json(j.dump());
  EXPECT_TRUE(v.value.has_value()) << "the edit must keep the manifest verified:" << listing(v.errors);
  if (!v.value) return Result<Protocol>::fail(v.errors);
  return check_protocol(*v.value);
}

void expect_misfit(const Json& j, const std::string& path, const std::string& needle) {
  Result<Protocol> p = protocol_of(j);
  ASSERT_FALSE(p.value.has_value()) << "expected a misfit: " << needle;
  bool found = false;
  for (const Error& e : p.errors) {
    found = found || (e.path == path && e.message.find(needle) != std::string::npos);
  }
  EXPECT_TRUE(found) << "expected `" << path << ": ..." << needle << "...`, got:" << listing(p.errors);
}

// A second program identical to `decode` under another name and batch.
void add_program(Json& j, const std::string& name, const Json& batch) {
  Json p = j[JsonPtr("/programs/decode")];
  p["batch"] = batch;
  j["programs"][name] = p;
}

TEST(Protocol, DerivesAxesFillsTablesAndForwards) {
  Result<Protocol> r = protocol_of(serving());
  ASSERT_TRUE(r.value.has_value()) << listing(r.errors);
  const Protocol& p = *r.value;
  EXPECT_EQ(p.rows.name, "tokens");
  EXPECT_EQ(p.rows.max, 8u);
  EXPECT_EQ(p.groups.name, "seqs");
  EXPECT_FALSE(p.tray.has_value());
  EXPECT_EQ(p.fills.size(), 6u);
  EXPECT_EQ(p.page_tables, std::vector<std::string>{"pages"});
  EXPECT_EQ(p.line_tables, std::vector<std::string>{"lines"});
  ASSERT_EQ(p.forwards.size(), 2u);
  EXPECT_EQ(p.forwards[0].program, "decode");  // name order
  EXPECT_EQ(p.forwards[0].groups, 4u);
  EXPECT_EQ(p.forwards[0].rows_const, 1u);
  EXPECT_EQ(p.forwards[0].tokens, std::optional<std::string>("next"));
  EXPECT_EQ(p.forwards[1].rows, "tokens");
}

TEST(Protocol, RejectsMissingSlotAndSeqLen) {
  Json j = serving([](Json& m) { erase(m, "/buffers/slots/fill"); erase(m, "/buffers/seq_lens/fill"); });
  expect_misfit(j, "/buffers", "no input has fill `slot`");
  expect_misfit(j, "/buffers", "no input has fill `seq_len`");
}

TEST(Protocol, RejectsSlotNotOverOneVar) {
  expect_misfit(serving([](Json& m) { set(m, "/buffers/slots/shape", Json::parse("[8]")); }),
                "/buffers/slots/shape", "`slots` (fill `slot`) is shaped [8], expected [<var>]");
}

TEST(Protocol, RejectsRowsAndGroupsOnOneVar) {
  expect_misfit(serving([](Json& m) { set(m, "/buffers/seq_lens/shape/0", "tokens"); }), "/buffers",
                "`slot` and `seq_len` are both over var `tokens`");
}

TEST(Protocol, RejectsMissingRowTokens) {
  expect_misfit(serving([](Json& m) { erase(m, "/buffers/token_ids/fill"); }), "/buffers",
                "nothing carries the tokens a call feeds");
}

TEST(Protocol, RejectsPositionOverGroups) {
  expect_misfit(serving([](Json& m) { set(m, "/buffers/positions/shape/0", "seqs"); }),
                "/buffers/positions/shape", "(fill `position`) is shaped [\"seqs\"]: expected [rows]");
}

TEST(Protocol, RejectsShortCuSeqlens) {
  expect_misfit(serving([](Json& m) { set(m, "/buffers/cu/shape/0", 4); }), "/buffers/cu/shape",
                "expected [n] with n >= groups + 1");
}

TEST(Protocol, RejectsWideSpanAt) {
  expect_misfit(serving([](Json& m) {
                  set(m, "/buffers/at", Json::parse(R"({"kind": "input", "dtype": "i32", "shape": [2], "fill": "span_at"})"));
                  set(m, "/ops/step/params/4", "in buffer<i32>");
                  set(m, "/programs/prefill/calls/0/args/4/buf", "at");
                }),
                "/buffers/at/shape", "expected i32 [1]");
}

TEST(Protocol, RejectsPageTableNotOverGroups) {
  expect_misfit(serving([](Json& m) { set(m, "/buffers/pages/shape/0", "tokens"); }), "/buffers/pages/shape",
                "page table `pages` is shaped [\"tokens\", 4], expected [<groups>, n]");
}

TEST(Protocol, RejectsLineTablePerRow) {
  expect_misfit(serving([](Json& m) { set(m, "/buffers/lines/shape/1", "tokens"); }), "/buffers/lines/shape",
                "line table `lines` has a column per row (`tokens`); lines are per sequence");
}

TEST(Protocol, RejectsNonI32Table) {
  expect_misfit(serving([](Json& m) {
                  set(m, "/buffers/pages/dtype", "i64");
                  set(m, "/ops/step/params/5", "in buffer<i64>");
                }),
                "/buffers/pages/dtype", "table `pages` is i64, the runtime hands out i32 page and line indices");
}

TEST(Protocol, RejectsConstantRowsBeyondRowsMax) {
  expect_misfit(serving([](Json& m) { set(m, "/programs/decode/batch/rows", 4); }), "/programs/decode/batch",
                "4 sequences of 4 rows exceed the 8 rows `tokens` allows");
}

TEST(Protocol, RejectsVarRowsOtherThanRowsVar) {
  expect_misfit(serving([](Json& m) { set(m, "/programs/prefill/batch/rows", "seqs"); }),
                "/programs/prefill/batch/rows", "batch.rows is var `seqs`, but the rows of a call go in `tokens`");
}

TEST(Protocol, RejectsVarRowsWithSeveralGroups) {
  expect_misfit(serving([](Json& m) { set(m, "/programs/prefill/batch/groups", 2); }),
                "/programs/prefill/batch/groups", "rows set per call means one sequence, not 2 groups");
}

TEST(Protocol, RejectsGroupsBeyondGroupsMax) {
  expect_misfit(serving([](Json& m) { set(m, "/programs/decode/batch/groups", 8); }),
                "/programs/decode/batch/groups", "8 groups exceed the 4 `seqs` allows");
}

TEST(Protocol, RejectsTwoProgramsForOneShape) {
  expect_misfit(serving([](Json& m) { add_program(m, "decode2", Json::parse(R"({"groups": 4, "rows": 1})")); }),
                "/programs/decode2/batch", "program `decode2` and `decode` accept the same call shape");
}

TEST(Protocol, RejectsNoBatchProgram) {
  Json j = serving([](Json& m) { erase(m, "/programs/decode/batch"); erase(m, "/programs/prefill/batch"); });
  expect_misfit(j, "/programs", "no program declares a `batch`: nothing for a serving loop to drive");
}

TEST(Protocol, RejectsNoTokenWriter) {
  expect_misfit(serving([](Json& m) { erase(m, "/buffers/next/fill"); }), "/programs",
                "no program with a `batch` writes a `tokens` output");
}

TEST(Protocol, RejectsCountWithoutSeveralTokens) {
  expect_misfit(serving([](Json& m) {
                  set(m, "/buffers/taken", Json::parse(R"({"kind": "output", "dtype": "i32", "shape": ["seqs"], "fill": "count"})"));
                  set(m, "/ops/take", Json::parse(R"({"params": ["out buffer<i32>"], "impl": {"launches": [{"entry": "extern:x"}]}})"));
                  m[JsonPtr("/programs/decode/calls")].push_back(Json::parse(R"({"op": "take", "args": [{"buf": "taken"}]})"));
                }),
                "/programs/decode", "writes `taken` (fill `count`) but no `tokens` output of several per sequence");
}

TEST(Protocol, AcceptsSpanWithSpanAt) {
  Json j = serving([](Json& m) {
    set(m, "/vars/run", Json::parse(R"({"max": 4})"));
    set(m, "/buffers/at", Json::parse(R"({"kind": "input", "dtype": "i32", "shape": [1], "fill": "span_at"})"));
    set(m, "/ops/runs", Json::parse(R"({"params": ["in buffer<i32>", "i32"], "impl": {"launches": [{"entry": "extern:x"}]}})"));
    m[JsonPtr("/programs/decode/calls")].push_back(Json::parse(R"({"op": "runs", "args": [{"buf": "at"}, {"var": "run"}]})"));
    add_program(m, "decode_run", Json::parse(R"({"groups": 4, "rows": 1, "span": "run"})"));
  });
  Result<Protocol> r = protocol_of(j);
  ASSERT_TRUE(r.value.has_value()) << listing(r.errors);
  ASSERT_TRUE(r.value->span.has_value());
  EXPECT_EQ(r.value->span->name, "run");
}

TEST(Protocol, RejectsSpanOnVarRows) {
  expect_misfit(serving([](Json& m) {
                  set(m, "/vars/run", Json::parse(R"({"max": 4})"));
                  set(m, "/programs/prefill/batch/span", "run");
                }),
                "/programs/prefill/batch/span", "a span rides a call of one row per sequence, not `tokens`");
}

TEST(Protocol, RejectsSpanWithoutSpanAt) {
  expect_misfit(serving([](Json& m) {
                  set(m, "/vars/run", Json::parse(R"({"max": 4})"));
                  set(m, "/programs/decode/batch/span", "run");
                }),
                "/buffers", "a program takes a run of rows (batch.span) but no input has fill `span_at`");
}

TEST(Protocol, DerivesTrayAxis) {
  Json j = serving([](Json& m) {
    set(m, "/vars/rows", Json::parse(R"({"max": 32})"));
    set(m, "/buffers/token_ids/shape/0", "rows");
  });
  Result<Protocol> r = protocol_of(j);
  ASSERT_TRUE(r.value.has_value()) << listing(r.errors);
  ASSERT_TRUE(r.value->tray.has_value());
  EXPECT_EQ(r.value->tray->name, "rows");
  EXPECT_EQ(r.value->tray->max, 32u);
}

}  // namespace
}  // namespace kernrt::manifest::testing

namespace kernrt::manifest::testing {
namespace {

// Bounded cost (issue 16): 20,000 batch programs of one shape used to be compared pairwise
// (4e8 comparisons); shapes are now looked up, and the misfits are capped at 100.
TEST(ProtocolCost, ManySameShapeProgramsAreLinearAndCapped) {
  Json j = serving();
  for (int i = 0; i < 20000; ++i) {
    add_program(j, "d" + std::to_string(i), Json::parse(R"({"groups": 4, "rows": 1})"));
  }
  Result<Protocol> p = protocol_of(j);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.errors.size(), 100u);
  EXPECT_EQ(p.errors.size() + p.omitted, 20000u);
  EXPECT_NE(p.errors.at(0).message.find("accept the same call shape"), std::string::npos);
}

TEST(ProtocolCost, ShortensNamesInMisfits) {
  const std::string name(1 << 20, 'p');
  Json j = serving();
  add_program(j, name, Json::parse(R"({"groups": 4, "rows": 1})"));
  Result<Protocol> p = protocol_of(j);
  ASSERT_FALSE(p);
  for (const Error& e : p.errors) EXPECT_LT(e.path.size() + e.message.size(), 600u);
}

TEST(ProtocolCost, NamesAShapeOfManyDimsByItsFirstOnes) {
  Json j = serving();
  Json dims = Json::array();
  for (int i = 0; i < 1000; ++i) dims.push_back(1);
  set(j, "/buffers/cu/shape", dims);
  expect_misfit(j, "/buffers/cu/shape", "is shaped [1, 1, 1, 1, 1, 1, 1, 1, \xe2\x80\xa6 1000 dims]");
  for (const Error& e : protocol_of(j).errors) EXPECT_LT(e.message.size(), 300u);
}

}  // namespace
}  // namespace kernrt::manifest::testing
