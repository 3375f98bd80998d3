// Verifier rule 12b: an `extern:nccl_*` launch is one of kern v5's collectives
// (nccl_extern.hpp), shaped [send, recv, count, {"rank": g}]; other extern names are left
// to the runtime (plain.json's `extern:x` still verifies, test_corpus.cpp).
#include "kernrt/manifest/nccl_extern.hpp"
#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

const char* const kLaunch = "/ops/ar/impl/launches/0";

Json nccl_base() {
  return Json::parse(R"({
    "schema_version": 4, "model": "kernrt-test-nccl-verify",
    "topology": {"groups": {"tp": 2}},
    "vars": {"n": {"max": 1024}},
    "buffers": {
      "x": {"dtype": "bf16", "shape": [1024], "kind": "input"},
      "y": {"dtype": "bf16", "shape": [1024], "kind": "output"}
    },
    "modules": {},
    "ops": {
      "ar": {"params": ["in buffer<bf16>", "out buffer<bf16>", "i64"],
             "impl": {"launches": [{"entry": "extern:nccl_allreduce_bf16",
                                    "params": ["in buffer<bf16>", "out buffer<bf16>", "i64", "i32"],
                                    "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"rank": "tp"}]}]}}
    },
    "programs": {"all_reduce": {"calls": [{"op": "ar", "args": [{"buf": "x"}, {"buf": "y"}, {"var": "n"}]}]}}
  })");
}

Json nccl_edited(const std::function<void(Json&)>& edit) {
  Json j = nccl_base();
  edit(j);
  return j;
}

TEST(NcclExtern, ParsesExactlyKernsNames) {
  auto x = nccl_extern("extern:nccl_reducescatter_u8");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->coll, Collective::ReduceScatter);
  EXPECT_EQ(x->elem, DType::u8);
  x = nccl_extern("extern:nccl_allgather_i32");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->coll, Collective::AllGather);
  EXPECT_EQ(x->elem, DType::i32);
  for (const char* bad : {"extern:nccl_all_reduce_bf16", "extern:nccl_allreduce_f16",
                          "extern:nccl_reduce_f32", "extern:nccl_allreduce", "nccl_allreduce_f32",
                          "extern:cublaslt_bf16_tn", "extern:nccl_allreduce_bf16_x"}) {
    EXPECT_FALSE(nccl_extern(bad)) << bad;
  }
  EXPECT_TRUE(is_nccl_entry("extern:nccl_all_reduce_bf16"));
  EXPECT_FALSE(is_nccl_entry("extern:x"));
}

TEST(NcclExtern, ElementCountsPerCollective) {
  uint64_t s = 0, r = 0;
  ASSERT_TRUE(nccl_elems(Collective::AllReduce, 10, 4, &s, &r));
  EXPECT_EQ(s, 10u);
  EXPECT_EQ(r, 10u);
  ASSERT_TRUE(nccl_elems(Collective::AllGather, 10, 4, &s, &r));
  EXPECT_EQ(s, 10u);
  EXPECT_EQ(r, 40u);
  ASSERT_TRUE(nccl_elems(Collective::ReduceScatter, 10, 4, &s, &r));
  EXPECT_EQ(s, 40u);
  EXPECT_EQ(r, 10u);
  EXPECT_FALSE(nccl_elems(Collective::AllGather, UINT64_MAX / 2, 4, &s, &r));
}

TEST(VerifyRule12b, AcceptsEachCollectiveAndElementType) {
  expect_verified(nccl_base());
  for (const char* coll : {"allreduce", "allgather", "reducescatter"}) {
    for (const char* elem : {"f32", "bf16", "i32", "u8"}) {
      const std::string p = std::string("buffer<") + elem + ">";
      Json j = nccl_edited([&](Json& m) {
        set(m, "/buffers/x/dtype", elem);
        set(m, "/buffers/y/dtype", elem);
        set(m, "/ops/ar/params", Json::array({"in " + p, "out " + p, "i64"}));
        set(m, at(kLaunch, "/params"), Json::array({"in " + p, "out " + p, "i64", "i32"}));
        set(m, at(kLaunch, "/entry"), std::string("extern:nccl_") + coll + "_" + elem);
      });
      SCOPED_TRACE(std::string(coll) + " " + elem);
      expect_verified(j);
    }
  }
}

TEST(VerifyRule12b, RejectsAnUnknownNameInTheNcclNamespace) {
  for (const char* name : {"extern:nccl_all_reduce_bf16", "extern:nccl_allreduce_f16",
                           "extern:nccl_broadcast_bf16"}) {
    expect_error(nccl_edited([&](Json& j) { set(j, at(kLaunch, "/entry"), name); }),
                 at(kLaunch, "/entry"),
                 std::string("unsupported extern `") + name + "`: the NCCL built-ins are "
                 "extern:nccl_{allreduce,allgather,reducescatter}_{f32,bf16,i32,u8}");
  }
}

TEST(VerifyRule12b, RejectsAnElementTypeOtherThanTheNames) {
  expect_error(nccl_edited([](Json& j) { set(j, at(kLaunch, "/entry"), "extern:nccl_allreduce_f32"); }),
               at(kLaunch, "/params/0"),
               "the send buffer of `extern:nccl_allreduce_f32` is an `in` (or `inout`) buffer<f32>, "
               "not `in buffer<bf16>`");
}

TEST(VerifyRule12b, RejectsAReceiveBufferThatIsOnlyRead) {
  expect_error(nccl_edited([](Json& j) {
                 set(j, at(kLaunch, "/params/1"), "in buffer<bf16>");
               }),
               at(kLaunch, "/params/1"), "the receive buffer of `extern:nccl_allreduce_bf16` is an `out`");
}

TEST(VerifyRule12b, RejectsAFloatCount) {
  expect_error(nccl_edited([](Json& j) {
                 set(j, "/ops/ar/params/2", "f32");
                 set(j, at(kLaunch, "/params/2"), "f32");
               }),
               at(kLaunch, "/params/2"), "the element count of `extern:nccl_allreduce_bf16` is an i32 or i64");
}

TEST(VerifyRule12b, RejectsOtherArity) {
  expect_error(nccl_edited([](Json& j) {
                 set(j, at(kLaunch, "/params"), Json::array({"in buffer<bf16>", "out buffer<bf16>", "i64"}));
                 set(j, at(kLaunch, "/args"), Json::parse(R"([{"param": 0}, {"param": 1}, {"param": 2}])"));
               }),
               at(kLaunch, "/args"), "takes [send, recv, count, rank] (4 params), got 3");
}

TEST(VerifyRule12b, RejectsARankThatIsNotARankArg) {
  expect_error(nccl_edited([](Json& j) {
                 set(j, "/topology/groups/tp", 1);
                 set(j, at(kLaunch, "/args/3"), Json::parse(R"({"i32": 0})"));
               }),
               at(kLaunch, "/args/3"), "4th arg must be {\"rank\": \"<group>\"}");
}

TEST(VerifyRule12b, ARankArgStillNeedsADeclaredGroup) {
  expect_error(nccl_edited([](Json& j) { set(j, at(kLaunch, "/args/3/rank"), "ep"); }),
               at(kLaunch, "/args/3/rank"), "unknown topology group `ep`");
}

}  // namespace
}  // namespace kernrt::manifest::testing
