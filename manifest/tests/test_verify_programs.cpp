// Verifier rules 19-24 and fragment mode: one base manifest, one edit per test.
#include "kernrt/manifest/parse.hpp"
#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

const char* const kCall0 = "/programs/step/calls/0";
const char* const kCall1 = "/programs/step/calls/1";

TEST(VerifyRule19, RejectsNoPrograms) {
  expect_error(edited([](Json& j) { set(j, "/programs", Json::object()); }), "/programs",
               "no programs declared");
}

TEST(VerifyRule19, RejectsOnceWithBatch) {
  expect_error(edited([](Json& j) {
                 set(j, "/programs/step/once", true);
                 set(j, "/programs/step/batch", Json::parse(R"({"groups": 1, "rows": 1})"));
               }),
               "/programs/step/once", "`once` (run after load) and `batch` (driven per step) are exclusive");
}

TEST(VerifyRule19, RejectsZeroGroups) {
  expect_error(edited([](Json& j) {
                 set(j, "/programs/step/batch", Json::parse(R"({"groups": 0, "rows": 1})"));
               }),
               "/programs/step/batch/groups", "batch.groups must be >= 1");
}

TEST(VerifyRule19, RejectsZeroRows) {
  expect_error(edited([](Json& j) {
                 set(j, "/programs/step/batch", Json::parse(R"({"groups": 1, "rows": 0})"));
               }),
               "/programs/step/batch/rows", "batch.rows must be >= 1");
}

TEST(VerifyRule19, RejectsUnknownRowsVar) {
  expect_error(edited([](Json& j) {
                 set(j, "/programs/step/batch", Json::parse(R"({"groups": 1, "rows": "seqs"})"));
               }),
               "/programs/step/batch/rows", "batch.rows names unknown var `seqs`");
}

TEST(VerifyRule19, RejectsUnknownSpanVar) {
  expect_error(edited([](Json& j) {
                 set(j, "/programs/step/batch", Json::parse(R"({"groups": 1, "rows": 1, "span": "run"})"));
               }),
               "/programs/step/batch/span", "batch.span names unknown var `run`");
}

TEST(VerifyRule20, RejectsUnknownOp) {
  expect_error(edited([](Json& j) { set(j, at(kCall0, "/op"), "gather"); }), at(kCall0, "/op"),
               "unknown op `gather`");
}

TEST(VerifyRule20, RejectsCallArity) {
  expect_error(edited([](Json& j) { erase(j, at(kCall0, "/args/3")); }), at(kCall0, "/args"),
               "op `lookup` takes 4 params, got 3 args");
}

TEST(VerifyRule20, RejectsUnknownBuffer) {
  expect_error(edited([](Json& j) { set(j, at(kCall0, "/args/0/buf"), "nope"); }), at(kCall0, "/args/0"),
               "unknown buffer `nope`");
}

TEST(VerifyRule20, RejectsBufferDtype) {
  expect_error(edited([](Json& j) { set(j, at(kCall0, "/args/1/buf"), "ids"); }), at(kCall0, "/args/1"),
               "buffer `ids` has dtype i32 but param expects bf16");
}

TEST(VerifyRule20, RejectsMisalignedOffset) {
  expect_error(edited([](Json& j) { set(j, at(kCall0, "/args/1/offset"), 3); }), at(kCall0, "/args/1/offset"),
               "offset 3 into buffer `table` is not 2-aligned for bf16");
}

TEST(VerifyRule20, RejectsOffsetOutsideBuffer) {
  expect_error(edited([](Json& j) { set(j, at(kCall0, "/args/1/offset"), 256000); }),
               at(kCall0, "/args/1/offset"), "offset 256000 is outside buffer `table` (256000 bytes at var upper bounds)");
}

TEST(VerifyRule20, RejectsUnknownState) {
  expect_error(edited([](Json& j) { set(j, at(kCall1, "/args/1/state"), "kv"); }), at(kCall1, "/args/1"),
               "unknown state `kv`");
}

TEST(VerifyRule20, RejectsStateForBufferParam) {
  expect_error(edited([](Json& j) { set(j, at(kCall0, "/args/1"), Json::parse(R"({"state": "cache"})")); }),
               at(kCall0, "/args/1"), "state `cache` does not match param `in buffer<bf16>`");
}

TEST(VerifyRule20, RejectsUnknownVarArg) {
  expect_error(edited([](Json& j) { set(j, at(kCall0, "/args/3/var"), "seqs"); }), at(kCall0, "/args/3"),
               "unknown var `seqs`");
}

TEST(VerifyRule20, RejectsVarForFloatParam) {
  expect_error(edited([](Json& j) { set(j, "/ops/lookup/params/3", "f32"); }), at(kCall0, "/args/3"),
               "var `tokens` cannot bind to an f32 param");
}

TEST(VerifyRule20, RejectsVarBeyondScalarRange) {
  expect_error(edited([](Json& j) { set(j, "/ops/lookup/params/3", "u8"); set(j, "/vars/tokens/max", 300); }),
               at(kCall0, "/args/3"), "var `tokens` max 300 exceeds u8 range");
}

TEST(VerifyRule20, RejectsExpressionBeyondScalarRange) {
  expect_error(edited([](Json& j) {
                 set(j, at(kCall1, "/args/3/expr"), Json::parse(R"({"mul": ["tokens", 100000000]})"));
               }),
               at(kCall1, "/args/3"),
               "expression {\"mul\": [\"tokens\", 100000000]} reaches 6400000000 at var upper "
               "bounds (tokens = 64), exceeding i32 range");
}

TEST(VerifyRule20, RejectsLiteralOfWrongType) {
  expect_error(edited([](Json& j) { set(j, at(kCall0, "/args/3"), Json::parse(R"({"i64": 1})")); }),
               at(kCall0, "/args/3"), "i64 literal 1 does not match param `i32`");
}

TEST(VerifyRule21, RejectsTensormapPastBufferAtOffset) {
  expect_error(edited([](Json& j) { set(j, at(kCall1, "/args/0/offset"), 2); }), at(kCall1, "/args/0"),
               "addresses 16384 bytes but buffer `hidden` has 16382 bytes past offset 2 at var upper bounds");
}

TEST(VerifyRule21, RejectsTensormapLargerThanBuffer) {
  expect_error(edited([](Json& j) { set(j, "/vars/tokens/max", 32); }), at(kCall1, "/args/0"),
               "addresses 16384 bytes but buffer `hidden` has 8192 bytes");
}

TEST(VerifyRule22, RejectsReadBeforeWrite) {
  expect_error(edited([](Json& j) {
                 Json calls = j[JsonPtr("/programs/step/calls")];
                 set(j, "/programs/step/calls", Json::array({calls[1], calls[0]}));
               }),
               "/programs/step/calls/0/args/0", "buffer `hidden` is read before ever being written");
}

TEST(VerifyRule22, RejectsWriteToWeight) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/table2", Json::parse(R"({"dtype": "bf16", "shape": [64, 128], "kind": "weight"})"));
                 set(j, at(kCall0, "/args/2/buf"), "table2");
               }),
               at(kCall0, "/args/2"), "op writes to read-only weight buffer `table2`");
}

TEST(VerifyRule22, RejectsPeerToExternOp) {
  expect_error(edited([](Json& j) {
                 set(j, "/topology", Json::parse(R"({"groups": {"ep": 1}})"));
                 set(j, "/buffers/slab", Json::parse(R"({"dtype": "u8", "shape": [64], "kind": "carry", "export": true})"));
                 set(j, "/buffers/peers", Json::parse(R"({"dtype": "u64", "shape": [1], "kind": "peer", "of": "slab", "group": "ep"})"));
                 set(j, "/ops/gemm", Json::parse(R"({"params": ["in buffer<u64>", "inout buffer<u8>"],
                   "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn"}]}})"));
                 j[JsonPtr("/programs/step/calls")].push_back(
                     Json::parse(R"({"op": "gemm", "args": [{"buf": "peers"}, {"buf": "slab"}]})"));
               }),
               "/programs/step/calls/2/args/0", "runtime built-ins never receive peer memory");
}

TEST(VerifyRule23, RejectsOutputNeverWritten) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/out2", Json::parse(R"({"dtype": "bf16", "shape": ["tokens", 128], "kind": "output"})"));
                 set(j, at(kCall0, "/args/1/buf"), "out2");
               }),
               "/buffers/out2", "output buffer `out2` is never written by any program");
}

TEST(VerifyRule24, RejectsUnusedBuffer) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/spare", Json::parse(R"({"dtype": "f32", "shape": [4], "kind": "workspace"})"));
               }),
               "/buffers/spare", "buffer `spare` is never used by any program");
}

TEST(VerifyRule24, RejectsUncalledOp) {
  expect_error(edited([](Json& j) { erase(j, "/programs/step/calls/1"); }), "/ops/mix", "op `mix` is never called");
}

TEST(VerifyRule24, RejectsUnlaunchedModule) {
  expect_error(edited([](Json& j) {
                 set(j, "/modules/spare", Json::parse(R"({"source": "s.cubin", "sha256": "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"})"));
               }),
               "/modules/spare", "module `spare` is never launched");
}

TEST(VerifyRule24, RejectsUnusedState) {
  expect_error(edited([](Json& j) { set(j, "/states/spare", Json::parse(R"({"bytes": 64})")); }), "/states/spare",
               "state `spare` is never used by any program");
}

TEST(VerifyRule24, RejectsUnusedVar) {
  expect_error(edited([](Json& j) { set(j, "/vars/seqs", Json::parse(R"({"max": 8})")); }), "/vars/seqs",
               "var `seqs` is never used");
}

TEST(VerifyRule24, RejectsUnusedGroup) {
  expect_error(edited([](Json& j) { set(j, "/topology", Json::parse(R"({"groups": {"ep": 4}})")); }),
               "/topology/groups/ep", "topology group `ep` is never used (no peer buffer or rank arg names it)");
}

TEST(VerifyCollect, ReportsEveryViolation) {
  Json j = edited([](Json& m) {
    set(m, "/schema_version", 3);
    set(m, at(kLookupLaunch, "/block/0"), 2048);
    set(m, at(kCall0, "/args/0/buf"), "nope");
  });
  const Errors errs = errors_of(j);
  ASSERT_GE(errs.size(), 3u) << listing(errs);
  EXPECT_EQ(errs.front().path, "/schema_version");  // rules run in §2.2 order
  for (const Error& e : errs) EXPECT_EQ(e.kind, ErrorKind::Manifest);
}

// Fragment mode: the ops and modules of the base, with caller-supplied vars.
Fragment base_fragment() {
  Json j = base();
  Json f = Json::object();
  f["modules"] = j["modules"];
  f["ops"] = j["ops"];
  Result<Fragment> r = parse_fragment(f.dump());
  EXPECT_TRUE(r.value.has_value()) << listing(r.errors);
  return r.value.value_or(Fragment{});
}

TEST(VerifyFragment, VerifiesWithVars) {
  const Errors errs = verify_fragment(base_fragment(), {{"tokens", Var{64}}});
  EXPECT_TRUE(errs.empty()) << listing(errs);
}

TEST(VerifyFragment, RejectsUnknownVarWithoutVars) {
  const Errors errs = verify_fragment(base_fragment(), {});
  bool found = false;
  for (const Error& e : errs) found = found || (e.path == at(kLookupLaunch, "/grid/0") && e.message == "unknown var `tokens`");
  EXPECT_TRUE(found) << listing(errs);
}

TEST(VerifyFragment, AppliesLaunchLimitsAtGivenVars) {
  const Errors errs = verify_fragment(base_fragment(), {{"tokens", Var{4096}}});
  bool found = false;
  for (const Error& e : errs) found = found || (e.path == at(kMixLaunch, "/shared_mem"));
  EXPECT_TRUE(found) << listing(errs);
}

TEST(VerifyFragment, RejectsUnlaunchedModule) {
  Fragment f = base_fragment();
  f.modules["spare"] = Module{"s.cubin", std::string(64, 'a')};
  const Errors errs = verify_fragment(f, {{"tokens", Var{64}}});
  ASSERT_EQ(errs.size(), 1u) << listing(errs);
  EXPECT_EQ(errs[0].path, "/modules/spare");
  EXPECT_EQ(errs[0].message, "module `spare` is never launched");
}

}  // namespace
}  // namespace kernrt::manifest::testing
