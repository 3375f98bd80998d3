// Verifier rules 10-18: one base manifest, one edit per test, path + message asserted.
#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

Json pack_edit(const std::string& rest, Json value) {
  return edited([&](Json& j) { set(j, at(kMixPack, rest), value); });
}

TEST(VerifyRule10, RejectsByteAggregateInInterface) {
  expect_error(edited([](Json& j) { set(j, "/ops/lookup/params/3", "bytes<16>"); }),
               "/ops/lookup/params/3", "interface param #3 is a byte aggregate; packs are launch-private");
}

TEST(VerifyRule11, RejectsImplWithoutLaunches) {
  expect_error(edited([](Json& j) { set(j, "/ops/lookup/impl/launches", Json::array()); }),
               "/ops/lookup/impl/launches", "implementation has no launches");
}

TEST(VerifyRule11, RejectsUnusedScratch) {
  expect_error(edited([](Json& j) {
                 set(j, "/ops/mix/impl/scratch/spare", Json::parse(R"({"dtype": "f32", "shape": [4]})"));
               }),
               "/ops/mix/impl/scratch/spare", "scratch `spare` is never used");
}

TEST(VerifyRule12, RejectsModulelessNonExtern) {
  expect_error(edited([](Json& j) {
                 set(j, kLookupLaunch, Json::parse(R"({"entry": "lookup_k"})"));
               }),
               at(kLookupLaunch, "/entry"),
               "a launch without a module must be a runtime built-in (`extern:<name>`)");
}

TEST(VerifyRule12, RejectsExternEntryWithModule) {
  expect_error(edited([](Json& j) { set(j, at(kLookupLaunch, "/entry"), "extern:gemm"); }),
               at(kLookupLaunch, "/entry"), "an extern entry has no module or launch geometry");
}

TEST(VerifyRule12, RejectsEmptyEntry) {
  expect_error(edited([](Json& j) { set(j, at(kLookupLaunch, "/entry"), ""); }),
               at(kLookupLaunch, "/entry"), "empty entry");
}

TEST(VerifyRule12, RejectsUnknownModule) {
  expect_error(edited([](Json& j) { set(j, at(kLookupLaunch, "/module"), "other"); }),
               at(kLookupLaunch, "/module"), "unknown module `other`");
}

TEST(VerifyRule12, RejectsPackOnExtern) {
  expect_error(edited([](Json& j) {
                 set(j, kLookupLaunch, Json::parse(R"({"entry": "extern:x", "params": ["bytes<8>"],
                   "args": [{"pack": {"size": 8, "fields": [{"at": 0, "param": 1}]}}]})"));
               }),
               at(kLookupLaunch, "/params"), "an extern launch takes pointers and scalars, not a pack");
}

TEST(VerifyRule13, RejectsTooManyThreads) {
  expect_error(edited([](Json& j) { set(j, at(kLookupLaunch, "/block/1"), 16); }),
               at(kLookupLaunch, "/block"), "block [128, 16, 1] exceeds 1024 threads or has a zero dim");
}

TEST(VerifyRule13, RejectsZeroBlockDim) {
  expect_error(edited([](Json& j) { set(j, at(kLookupLaunch, "/block/2"), 0); }),
               at(kLookupLaunch, "/block"), "exceeds 1024 threads or has a zero dim");
}

TEST(VerifyRule13, RejectsBlockZAbove64) {
  expect_error(edited([](Json& j) { set(j, at(kLookupLaunch, "/block"), Json::parse("[1, 1, 128]")); }),
               at(kLookupLaunch, "/block/2"), "block.z 128 > 64");
}

TEST(VerifyRule13, RejectsGridXAboveLimitAtMaxima) {
  expect_error(edited([](Json& j) {
                 set(j, at(kLookupLaunch, "/grid/0"), Json::parse(R"({"mul": ["tokens", 67108864]})"));
               }),
               at(kLookupLaunch, "/grid/0"),
               "grid.x: 4294967296 exceeds CUDA limit 2147483647 at var upper bounds");
}

TEST(VerifyRule13, RejectsGridYAboveLimitAtMaxima) {
  expect_error(edited([](Json& j) {
                 set(j, at(kLookupLaunch, "/grid/1"), Json::parse(R"({"mul": ["tokens", 1024]})"));
               }),
               at(kLookupLaunch, "/grid/1"), "grid.y: 65536 exceeds CUDA limit 65535 at var upper bounds");
}

TEST(VerifyRule13, RejectsGridZeroAtLowerBounds) {
  expect_error(edited([](Json& j) {
                 set(j, at(kLookupLaunch, "/grid/1"), Json::parse(R"({"ceil_div": [0, 4]})"));
               }),
               at(kLookupLaunch, "/grid/1"), "grid.y: evaluates to 0 at var lower bounds");
}

TEST(VerifyRule13, RejectsDivisionByZeroInGrid) {
  expect_error(edited([](Json& j) {
                 set(j, at(kLookupLaunch, "/grid/0"), Json::parse(R"({"ceil_div": ["tokens", 0]})"));
               }),
               at(kLookupLaunch, "/grid/0"), "division by zero");
}

TEST(VerifyRule13, RejectsSharedMemAboveOptIn) {
  expect_error(edited([](Json& j) {
                 set(j, at(kMixLaunch, "/shared_mem"), Json::parse(R"({"mul": ["tokens", 4096]})"));
               }),
               at(kMixLaunch, "/shared_mem"),
               "shared_mem: 262144 bytes exceeds opt-in limit 232448 at var upper bounds");
}

TEST(VerifyRule13, RejectsOversizedCluster) {
  expect_error(edited([](Json& j) { set(j, at(kMixLaunch, "/cluster"), Json::parse("[4, 8, 1]")); }),
               at(kMixLaunch, "/cluster"), "cluster [4, 8, 1] has a zero dim or more than 16 blocks");
}

TEST(VerifyRule13, RejectsGridNotMultipleOfCluster) {
  // grid.x = tokens is 1 at the lower bounds, not a multiple of 2.
  expect_error(edited([](Json& j) { set(j, at(kMixLaunch, "/cluster"), Json::parse("[2, 1, 1]")); }),
               at(kMixLaunch, "/cluster/0"),
               "grid.x = 1 at var lower bounds is not a multiple of cluster.x = 2");
}

TEST(VerifyRule14, RejectsArityMismatch) {
  expect_error(edited([](Json& j) { erase(j, "/ops/mix/impl/launches/1/args/2"); }),
               "/ops/mix/impl/launches/1/args", "takes 3 params, got 2 args");
}

TEST(VerifyRule15, RejectsParamOutOfRange) {
  expect_error(edited([](Json& j) { set(j, "/ops/mix/impl/launches/1/args/1/param", 9); }),
               "/ops/mix/impl/launches/1/args/1", "interface param #9 out of range (4 interface params)");
}

TEST(VerifyRule15, RejectsIncompatibleForward) {
  expect_error(edited([](Json& j) { set(j, "/ops/mix/impl/launches/1/params/1", "out buffer<f32>"); }),
               "/ops/mix/impl/launches/1/args/1",
               "interface param `out buffer<bf16>` does not match launch param `out buffer<f32>`");
}

TEST(VerifyRule15, RejectsWriteThroughIn) {
  expect_error(edited([](Json& j) { set(j, at(kMixLaunch, "/params/0"), "inout buffer<bf16>"); }),
               at(kMixLaunch, "/args/0"), "launch writes through interface `in` param #0");
}

TEST(VerifyRule15, RejectsOutReadBeforeWritten) {
  expect_error(edited([](Json& j) { set(j, "/ops/lookup/params/2", "out buffer<bf16>");
                                    set(j, at(kLookupLaunch, "/params"),
                                        Json::parse(R"(["in buffer<i32>", "in buffer<bf16>", "inout buffer<bf16>", "i32"])")); }),
               at(kLookupLaunch, "/params/2"),
               "interface `out` param #2 read before any launch wrote it");
}

TEST(VerifyRule15, RejectsUnknownScratch) {
  expect_error(edited([](Json& j) { set(j, "/ops/mix/impl/launches/1/args/0/scratch", "nope"); }),
               "/ops/mix/impl/launches/1/args/0", "unknown scratch `nope`");
}

TEST(VerifyRule15, RejectsScratchOnNonBuffer) {
  expect_error(edited([](Json& j) { set(j, "/ops/mix/impl/launches/1/args/2", Json::parse(R"({"scratch": "acc"})")); }),
               "/ops/mix/impl/launches/1/args/2", "scratch `acc` bound to non-buffer param `i32`");
}

TEST(VerifyRule15, RejectsScratchDtype) {
  expect_error(edited([](Json& j) { set(j, "/ops/mix/impl/scratch/acc/dtype", "bf16"); }),
               at(kMixLaunch, "/args/2"), "scratch `acc` has dtype bf16 but param expects f32");
}

TEST(VerifyRule15, RejectsScratchReadBeforeWritten) {
  expect_error(edited([](Json& j) { set(j, at(kMixLaunch, "/params/2"), "in buffer<f32>"); }),
               at(kMixLaunch, "/args/2"), "scratch `acc` is read before any launch wrote it");
}

TEST(VerifyRule15, RejectsRankOnFloatParam) {
  expect_error(edited([](Json& j) {
                 set(j, "/topology", Json::parse(R"({"groups": {"ep": 1}})"));
                 set(j, "/ops/mix/impl/launches/1/params/2", "f32");
                 set(j, "/ops/mix/impl/launches/1/args/2", Json::parse(R"({"rank": "ep"})"));
               }),
               "/ops/mix/impl/launches/1/args/2", "a rank binds only to an i32 or i64 param, not `f32`");
}

TEST(VerifyRule15, RejectsLiteralOfWrongType) {
  expect_error(edited([](Json& j) { set(j, "/ops/mix/impl/launches/1/args/2", Json::parse(R"({"i64": 128})")); }),
               "/ops/mix/impl/launches/1/args/2", "i64 literal 128 does not match launch param `i32`");
}

TEST(VerifyRule16, RejectsPackSizeMismatch) {
  expect_error(pack_edit("/size", 256), at(kMixPack, "/size"),
               "pack of 256 bytes bound to a `bytes<192>` param");
}

TEST(VerifyRule16, RejectsPackOnNonBytesParam) {
  expect_error(edited([](Json& j) { set(j, at(kMixLaunch, "/params/3"), "i64"); }), kMixPack,
               "a pack binds only to a `bytes<n>` param, not `i64`");
}

TEST(VerifyRule16, RejectsFieldPastImage) {
  expect_error(pack_edit("/fields/3/at", 188), at(kMixPack, "/fields/3"),
               "field #3 at 188 spans 8 bytes, past the 192 byte image");
}

TEST(VerifyRule16, RejectsOverlappingFields) {
  expect_error(pack_edit("/fields/2/at", 130), at(kMixPack, "/fields/2"), "field #2 overlaps field #1");
}

TEST(VerifyRule16, RejectsOverlapWithEarlierWideField) {
  // Field #1 moves inside the tensormap's 128 bytes; #2 then also lies inside it.
  Json j = edited([](Json& m) {
    set(m, at(kMixPack, "/fields/1/at"), 8);
    set(m, at(kMixPack, "/fields/2/at"), 16);
  });
  expect_error(j, at(kMixPack, "/fields/1"), "field #1 overlaps field #0");
  expect_error(j, at(kMixPack, "/fields/2"), "field #2 overlaps field #0");
}

TEST(VerifyRule16, RejectsUnknownWidth) {
  expect_error(pack_edit("/fields/1/param", 7), at(kMixPack, "/fields/1"), "field #1: width unknown");
}

TEST(VerifyRule16, RejectsUnknownVarField) {
  expect_error(pack_edit("/fields/2/var", "seqs"), at(kMixPack, "/fields/2/var"), "unknown var `seqs`");
}

TEST(VerifyRule16, RejectsUnknownScratchField) {
  expect_error(pack_edit("/fields/3", Json::parse(R"({"at": 144, "scratch": "nope"})")),
               at(kMixPack, "/fields/3/scratch"), "unknown scratch `nope`");
}

TEST(VerifyRule16, RejectsParamFieldOutOfRange) {
  expect_error(pack_edit("/fields/3", Json::parse(R"({"at": 144, "width": 8, "param": 4})")),
               at(kMixPack, "/fields/3/param"), "interface param #4 out of range (4 interface params)");
}

TEST(VerifyRule17, RejectsTensormapWidth) {
  expect_error(pack_edit("/fields/0/width", 64), at(kMixPack, "/fields/0/width"),
               "a tensormap field is 128 bytes, not 64");
}

TEST(VerifyRule17, RejectsUnalignedTensormap) {
  Json j = edited([](Json& m) {
    set(m, at(kMixPack, "/size"), 256);
    set(m, at(kMixLaunch, "/params/3"), "bytes<256>");
    set(m, at(kMixPack, "/fields/0/at"), 160);
  });
  expect_error(j, at(kMixPack, "/fields/0/at"), "tensormap at 160 is not 64-byte aligned");
}

TEST(VerifyRule17, RejectsTensormapOverScalar) {
  expect_error(pack_edit("/fields/0/tensormap/param", 3), at(kMixPack, "/fields/0/tensormap/param"),
               "tensormap over interface param #3 (`i32`), which is not a buffer or state");
}

TEST(VerifyRule17, RejectsTooManyDims) {
  expect_error(pack_edit("/fields/0/tensormap/dims", Json::parse("[8, 1, 1, 1, 1, 1]")),
               at(kMixPack, "/fields/0/tensormap/dims"), "dims has 6 entries, expected 1 to 5");
}

TEST(VerifyRule17, RejectsStrideCount) {
  expect_error(pack_edit("/fields/0/tensormap/strides", Json::parse("[256, 512]")),
               at(kMixPack, "/fields/0/tensormap/strides"), "strides has 2 entries, expected dims - 1 = 1");
}

TEST(VerifyRule17, RejectsBoxCount) {
  expect_error(pack_edit("/fields/0/tensormap/box", Json::parse("[64]")),
               at(kMixPack, "/fields/0/tensormap/box"), "box has 1 entries, expected 2");
}

TEST(VerifyRule17, RejectsZeroInnerDim) {
  expect_error(pack_edit("/fields/0/tensormap/dims/0", 0), at(kMixPack, "/fields/0/tensormap/dims/0"),
               "dims[0] is 0; only the outermost dim may span the buffer");
}

TEST(VerifyRule17, RejectsZeroOneDimDescriptor) {
  Json j = edited([](Json& m) {
    set(m, at(kMixPack, "/fields/0/tensormap"),
        Json::parse(R"({"param": 0, "dtype": "bf16", "dims": [0], "box": [64]})"));
  });
  expect_error(j, at(kMixPack, "/fields/0/tensormap/dims/0"), "dims[0] is 0");
}

TEST(VerifyRule17, AcceptsSpanningOuterDim) {
  expect_verified(pack_edit("/fields/0/tensormap/dims/1", 0));
}

TEST(VerifyRule17, RejectsBoxOutOfRange) {
  expect_error(pack_edit("/fields/0/tensormap/box/1", 512), at(kMixPack, "/fields/0/tensormap/box/1"),
               "box[1] = 512, must be 1..=256");
}

TEST(VerifyRule17, RejectsStrideNotMultipleOf16) {
  expect_error(pack_edit("/fields/0/tensormap/strides/0", 200), at(kMixPack, "/fields/0/tensormap/strides/0"),
               "strides[0] = 200 is not a positive multiple of 16");
}

TEST(VerifyRule17, RejectsInnerDimNotMultipleOf16Bytes) {
  expect_error(pack_edit("/fields/0/tensormap/dims/0", 100), at(kMixPack, "/fields/0/tensormap/dims/0"),
               "dims[0] = 100 elements is not a multiple of 16 bytes");
}

TEST(VerifyRule17, RejectsInnerBoxNotMultipleOf16Bytes) {
  expect_error(pack_edit("/fields/0/tensormap/box/0", 12), at(kMixPack, "/fields/0/tensormap/box/0"),
               "box[0] = 12 elements spans 24 bytes, not a multiple of 16");
}

TEST(VerifyRule17, RejectsInnerBoxWiderThanSwizzle) {
  expect_error(pack_edit("/fields/0/tensormap/swizzle", 64), at(kMixPack, "/fields/0/tensormap/box/0"),
               "box[0] spans 128 bytes, more than the 64 byte swizzle span");
}

TEST(VerifyRule17, RejectsSwizzleValue) {
  expect_error(pack_edit("/fields/0/tensormap/swizzle", 96), at(kMixPack, "/fields/0/tensormap/swizzle"),
               "swizzle 96 is not one of 0, 32, 64, 128");
}

TEST(VerifyRule17, RejectsL2PromotionValue) {
  expect_error(pack_edit("/fields/0/tensormap/l2_promotion", 32),
               at(kMixPack, "/fields/0/tensormap/l2_promotion"), "l2_promotion 32 is not one of 0, 64, 128, 256");
}

TEST(VerifyRule18, RejectsOutParamNeverWritten) {
  expect_error(edited([](Json& j) {
                 set(j, at(kLookupLaunch, "/params"), Json::parse(R"(["in buffer<i32>", "in buffer<bf16>", "i32"])"));
                 set(j, at(kLookupLaunch, "/args"), Json::parse(R"([{"param": 0}, {"param": 1}, {"param": 3}])"));
               }),
               "/ops/lookup/params/2", "interface `out buffer<bf16>` param #2 is never written by any launch");
}

TEST(VerifyRule18, CountsPackPointerAsWrite) {
  // Launch #1 no longer writes `out`; the pack's pointer field at 144 still does.
  expect_verified(edited([](Json& j) {
    set(j, "/ops/mix/impl/launches/1/params/1", "in buffer<bf16>");
    set(j, "/ops/mix/impl/launches/1/args/1/param", 0);
  }));
}

}  // namespace
}  // namespace kernrt::manifest::testing
