// Verifier rules 1-9: one base manifest, one edit per test, path + message asserted.
#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

// A topology with one exported slab and a peer buffer over it, used by the rule 8 tests.
Json with_peer() {
  return edited([](Json& j) {
    set(j, "/topology", Json::parse(R"({"groups": {"ep": 2}})"));
    set(j, "/buffers/slab", Json::parse(R"({"dtype": "u8", "shape": [4096], "kind": "carry", "export": true})"));
    set(j, "/buffers/slab_peers",
        Json::parse(R"({"dtype": "u64", "shape": [2], "kind": "peer", "of": "slab", "group": "ep"})"));
    set(j, "/ops/sync", Json::parse(R"({"params": ["in buffer<u64>", "inout buffer<u8>", "i32"],
      "impl": {"launches": [{"module": "kern", "entry": "sync_k", "block": [32, 1, 1], "grid": [1, 1, 1]}]}})"));
    j["/programs/step/calls"_json_pointer].push_back(Json::parse(
        R"({"op": "sync", "args": [{"buf": "slab_peers"}, {"buf": "slab"}, {"rank": "ep"}]})"));
  });
}

TEST(VerifyBase, BaseManifestVerifies) { expect_verified(base()); }

TEST(VerifyBase, PeerBaseVerifies) { expect_verified(with_peer()); }

TEST(VerifyRule01, RejectsSchemaVersion) {
  expect_error(edited([](Json& j) { set(j, "/schema_version", 5); }), "/schema_version",
               "unsupported schema_version 5 (this runtime reads 4)");
}

TEST(VerifyRule02, RejectsVarMaxZero) {
  expect_error(edited([](Json& j) { set(j, "/vars/tokens/max", 0); }), "/vars/tokens/max",
               "max must be >= 1");
}

TEST(VerifyRule03, RejectsZeroGroupSize) {
  Json j = with_peer();
  set(j, "/topology/groups/tp", 0);
  expect_error(j, "/topology/groups/tp", "size must be > 0");
}

TEST(VerifyRule03, RejectsUnknownGroup) {
  Json j = with_peer();
  set(j, "/programs/step/calls/2/args/2/rank", "tp");
  expect_error(j, "/programs/step/calls/2/args/2/rank", "unknown topology group `tp`");
}

TEST(VerifyRule03, RejectsGroupWithoutTopology) {
  expect_error(edited([](Json& j) {
                 set(j, "/ops/mix/impl/launches/1/args/2", Json::parse(R"({"rank": "ep"})"));
               }),
               "/ops/mix/impl/launches/1/args/2/rank",
               "group `ep` but the manifest declares no topology");
}

TEST(VerifyRule04, RejectsStateWithoutSize) {
  expect_error(edited([](Json& j) { set(j, "/states/cache", Json::object()); }), "/states/cache",
               "one of bytes_per_token / bytes / bytes_per_seq must be > 0");
}

TEST(VerifyRule04, RejectsStateWithTwoSizes) {
  expect_error(edited([](Json& j) { set(j, "/states/cache/bytes", 64); }), "/states/cache",
               "bytes_per_token, bytes and bytes_per_seq are exclusive");
}

TEST(VerifyRule05, RejectsEmptyShape) {
  expect_error(edited([](Json& j) { set(j, "/buffers/hidden/shape", Json::array()); }),
               "/buffers/hidden/shape", "shape must not be empty");
}

TEST(VerifyRule05, RejectsZeroDimension) {
  expect_error(edited([](Json& j) { set(j, "/buffers/hidden/shape/1", 0); }),
               "/buffers/hidden/shape/1", "zero-sized dimension");
}

TEST(VerifyRule05, RejectsUnknownVarInShape) {
  expect_error(edited([](Json& j) { set(j, "/buffers/hidden/shape/0", "seqs"); }),
               "/buffers/hidden/shape/0", "unknown var `seqs` in shape");
}

TEST(VerifyRule05, RejectsByteSizeOverflow) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/table/shape", Json::parse("[4294967296, 4294967296]"));
               }),
               "/buffers/table/shape", "byte size overflows u64 at var upper bounds");
}

TEST(VerifyRule05, RejectsZeroScratchDimension) {
  expect_error(edited([](Json& j) { set(j, "/ops/mix/impl/scratch/acc/shape/1", 0); }),
               "/ops/mix/impl/scratch/acc/shape/1", "zero-sized dimension");
}

TEST(VerifyRule06, RejectsIndexIntoWithBounds) {
  expect_error(edited([](Json& j) { set(j, "/buffers/ids/domain/index_into", "table"); }),
               "/buffers/ids/domain", "`index_into` and `min`/`max` are mutually exclusive");
}

TEST(VerifyRule06, RejectsEmptyDomain) {
  expect_error(edited([](Json& j) { set(j, "/buffers/ids/domain", Json::object()); }),
               "/buffers/ids/domain", "empty (declare bounds, `index_into`, or `monotone`)");
}

TEST(VerifyRule06, RejectsZeroStride) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/ids/domain", Json::parse(R"({"index_into": "table", "stride": 0})"));
               }),
               "/buffers/ids/domain/stride", "`stride` must be > 0");
}

TEST(VerifyRule06, RejectsStrideWithoutIndexInto) {
  expect_error(edited([](Json& j) { set(j, "/buffers/ids/domain/stride", 4); }),
               "/buffers/ids/domain/stride", "`stride` only applies with `index_into`");
}

TEST(VerifyRule06, RejectsFloatIndex) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/hidden/domain", Json::parse(R"({"index_into": "table"})"));
               }),
               "/buffers/hidden/domain/index_into", "a bf16 buffer cannot index anything");
}

TEST(VerifyRule06, RejectsUnknownIndexTarget) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/ids/domain", Json::parse(R"({"index_into": "nowhere"})"));
               }),
               "/buffers/ids/domain/index_into", "`index_into` unknown buffer/state `nowhere`");
}

TEST(VerifyRule06, RejectsSelfIndex) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/ids/domain", Json::parse(R"({"index_into": "ids"})"));
               }),
               "/buffers/ids/domain/index_into", "a buffer cannot index itself");
}

TEST(VerifyRule06, RejectsLinesThatDoNotDivideState) {
  expect_error(edited([](Json& j) {
                 set(j, "/states/cache", Json::parse(R"({"bytes_per_seq": 24})"));
                 set(j, "/buffers/ids/domain", Json::parse(R"({"index_into": "cache", "stride": 16})"));
               }),
               "/buffers/ids/domain/index_into",
               "per-sequence state `cache` in lines of 16 bytes, which do not divide its 24 bytes");
}

TEST(VerifyRule06, RejectsMonotoneOnTwoDimensions) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/ids/shape", Json::parse(R"(["tokens", 2])"));
                 set(j, "/buffers/ids/domain/monotone", true);
               }),
               "/buffers/ids/domain/monotone", "`monotone` requires a one-dimensional buffer");
}

TEST(VerifyRule06, RejectsFloatBoundOnIntegerBuffer) {
  expect_error(edited([](Json& j) { set(j, "/buffers/ids/domain/max", 0.5); }),
               "/buffers/ids/domain/max", "float `max` on a i32 buffer");
}

TEST(VerifyRule06, RejectsUnknownVarInBound) {
  expect_error(edited([](Json& j) { set(j, "/buffers/ids/domain/max", "seqs"); }),
               "/buffers/ids/domain/max", "unknown var `seqs`");
}

TEST(VerifyRule06, RejectsMinAboveMaxAtLowerBounds) {
  // max = tokens is 1 at the lower bounds, below min 5; at the maxima 5 <= 64 holds.
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/ids/domain", Json::parse(R"({"min": 5, "max": "tokens"})"));
               }),
               "/buffers/ids/domain", "min 5 > max 1");
}

TEST(VerifyRule07, RejectsOutputRoleOnInput) {
  expect_error(edited([](Json& j) { set(j, "/buffers/ids/fill", "tokens"); }),
               "/buffers/ids/fill", "fill `tokens` is read from an output but the buffer is input");
}

TEST(VerifyRule07, RejectsInputRoleOnOutput) {
  expect_error(edited([](Json& j) {
                 set(j, "/buffers/out/dtype", "i32");
                 set(j, "/buffers/out/fill", "slot");
               }),
               "/buffers/out/fill", "fill `slot` is written into an input but the buffer is output");
}

TEST(VerifyRule07, RejectsFillOnWorkspace) {
  expect_error(edited([](Json& j) { set(j, "/buffers/hidden/fill", "token"); }),
               "/buffers/hidden/fill", "a fill sits on an input or output, not a workspace buffer");
}

TEST(VerifyRule07, RejectsFillOnFloatBuffer) {
  expect_error(edited([](Json& j) { set(j, "/buffers/out/fill", "tokens"); }),
               "/buffers/out/fill", "fill `tokens` needs an i32 or i64 buffer, not bf16");
}

TEST(VerifyRule08, RejectsExportedPeer) {
  Json j = with_peer();
  set(j, "/buffers/slab_peers/export", true);
  expect_error(j, "/buffers/slab_peers/export", "a peer buffer cannot itself be exported");
}

TEST(VerifyRule08, RejectsPeerDtype) {
  Json j = with_peer();
  set(j, "/buffers/slab_peers/dtype", "i64");
  expect_error(j, "/buffers/slab_peers/dtype", "dtype must be u64, not i64");
}

TEST(VerifyRule08, RejectsPeerDomain) {
  Json j = with_peer();
  set(j, "/buffers/slab_peers/domain", Json::parse(R"({"min": 0})"));
  expect_error(j, "/buffers/slab_peers/domain", "it takes no domain");
}

TEST(VerifyRule08, RejectsPeerWithoutOf) {
  Json j = with_peer();
  erase(j, "/buffers/slab_peers/of");
  expect_error(j, "/buffers/slab_peers", "must name the exported buffer or state it holds addresses `of`");
}

TEST(VerifyRule08, RejectsPeerOfUnexportedBuffer) {
  Json j = with_peer();
  set(j, "/buffers/slab/export", false);
  expect_error(j, "/buffers/slab_peers/of", "`of` buffer `slab` is not exported");
}

TEST(VerifyRule08, RejectsPeerOfUnknown) {
  Json j = with_peer();
  set(j, "/buffers/slab_peers/of", "nothing");
  expect_error(j, "/buffers/slab_peers/of", "`of` unknown buffer/state `nothing`");
}

TEST(VerifyRule08, RejectsPeerOfItself) {
  Json j = with_peer();
  set(j, "/buffers/slab_peers/of", "slab_peers");
  expect_error(j, "/buffers/slab_peers/of", "a peer buffer cannot be `of` itself");
}

TEST(VerifyRule08, RejectsPeerShapeOtherThanGroupSize) {
  Json j = with_peer();
  set(j, "/buffers/slab_peers/shape/0", 4);
  expect_error(j, "/buffers/slab_peers/shape", "a peer buffer over group `ep` has shape [2]");
}

TEST(VerifyRule08, RejectsPeerWithoutGroup) {
  Json j = with_peer();
  erase(j, "/buffers/slab_peers/group");
  expect_error(j, "/buffers/slab_peers", "a peer buffer must name the topology `group`");
}

TEST(VerifyRule08, RejectsOfOnNonPeer) {
  expect_error(edited([](Json& j) { set(j, "/buffers/hidden/of", "out"); }), "/buffers/hidden/of",
               "`of` only applies to peer buffers");
}

TEST(VerifyRule08, RejectsGroupOnNonPeer) {
  expect_error(edited([](Json& j) { set(j, "/buffers/hidden/group", "ep"); }),
               "/buffers/hidden/group", "`group` only applies to peer buffers");
}

TEST(VerifyRule09, RejectsShortSha256) {
  expect_error(edited([](Json& j) { set(j, "/modules/kern/sha256", "abc"); }),
               "/modules/kern/sha256", "sha256 `abc` is not 64 hex chars");
}

TEST(VerifyRule09, RejectsEmptySource) {
  expect_error(edited([](Json& j) { set(j, "/modules/kern/source", ""); }),
               "/modules/kern/source", "empty source");
}

TEST(VerifyRule09, RejectsMalformedRegistryRef) {
  expect_error(edited([](Json& j) { set(j, "/modules/kern/source", "hf:org/repo/../x.cubin"); }),
               "/modules/kern/source",
               "invalid registry ref `hf:org/repo/../x.cubin`: expected hf:<org>/<repo>/<path>[@revision]");
}

TEST(VerifyRule09, AcceptsRegistryRefWithRevision) {
  expect_verified(edited([](Json& j) { set(j, "/modules/kern/source", "hf:org/repo/build/x.so@v1"); }));
}

}  // namespace
}  // namespace kernrt::manifest::testing
