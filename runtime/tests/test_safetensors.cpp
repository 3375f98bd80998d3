// Safetensors: header parsing (8-byte little-endian length + JSON) and binding weight
// buffers by exact name with dtype and size checks; every failure an Artifact error.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "fixtures.hpp"
#include "safetensors.hpp"

namespace kernrt {
namespace {

std::string safetensors(const std::string& header_json, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_json + data;
}

manifest::Manifest two_weights() {
  manifest::Manifest m;
  manifest::Buffer w;
  w.dtype = manifest::DType::bf16;
  w.shape = {manifest::Expr::constant(4)};
  w.kind = manifest::BufferKind::weight;
  m.buffers["w"] = w;
  manifest::Buffer b = w;
  b.dtype = manifest::DType::f32;
  b.shape = {manifest::Expr::constant(2)};
  m.buffers["b"] = b;
  return m;
}

const std::map<std::string, uint64_t> kSizes{{"w", 8}, {"b", 8}};

TEST(Safetensors, ParsesHeaderWithAbsoluteOffsets) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  const std::string file = safetensors(header, std::string(16, 'd'));
  auto r = rt::parse_safetensors_header(file, file.size(), "m.safetensors");
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  EXPECT_EQ(r.value->data_start, 8 + header.size());
  ASSERT_EQ(r.value->tensors.size(), 2u);
  EXPECT_EQ(r.value->tensors.at("b").begin, 8 + header.size() + 8);
  EXPECT_EQ(r.value->tensors.at("w").shape, std::vector<uint64_t>{4});
}

TEST(Safetensors, RejectsTruncatedAndMalformedHeaders) {
  auto r = rt::parse_safetensors_header("abc", 3, "t.safetensors");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors[0].kind, ErrorKind::Artifact);
  EXPECT_NE(r.errors[0].message.find("shorter than its 8-byte header length"), std::string::npos);

  std::string lying = safetensors("{}", "");
  lying[0] = 100;  // declares 100 header bytes, has 2
  r = rt::parse_safetensors_header(lying, lying.size(), "t.safetensors");
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("declares a 100-byte header but the file has 10 bytes"),
            std::string::npos)
      << r.errors[0].message;

  std::string past = safetensors(R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,9]}})", "12345678");
  r = rt::parse_safetensors_header(past, past.size(), "t.safetensors");
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("data_offsets [0, 9] outside the 8 data bytes"),
            std::string::npos)
      << r.errors[0].message;

  std::string neg = safetensors(R"({"w":{"dtype":"BF16","shape":[-4],"data_offsets":[0,8]}})", "12345678");
  EXPECT_FALSE(rt::parse_safetensors_header(neg, neg.size(), "t.safetensors"));
  std::string junk = safetensors("[1,2", "");
  EXPECT_FALSE(rt::parse_safetensors_header(junk, junk.size(), "t.safetensors"));
}

struct Bind : ::testing::Test {
  testing::TempDir dir;
  std::string write(const std::string& name, const std::string& header, size_t data) {
    testing::write_bytes(dir.file(name), safetensors(header, std::string(data, 'x')));
    return dir.file(name);
  }
};

TEST_F(Bind, BindsEveryWeightByExactName) {
  auto a = write("a.safetensors", R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})", 8);
  auto b = write("b.safetensors",
                 R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("extra":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}})", 9);
  auto r = rt::bind_weights(two_weights(), kSizes, {a, b});
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  EXPECT_EQ(r.value->at("w").file, a);
  EXPECT_EQ(r.value->at("b").file, b);
  EXPECT_EQ(r.value->at("b").bytes, 8u);
}

TEST_F(Bind, ReportsMissingWrongDtypeAndWrongSize) {
  auto a = write("a.safetensors",
                 R"({"w":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", 8);
  auto r = rt::bind_weights(two_weights(), kSizes, {a});
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 2u) << testing::all_messages(r.errors);
  EXPECT_EQ(r.errors[0].path, "/buffers/b");
  EXPECT_EQ(r.errors[0].message, "weight `b` missing: no tensor of that name in `" + a + "`");
  EXPECT_EQ(r.errors[1].message, "weight `w` in `" + a + "` has dtype `F16`, expected `bf16`");

  auto c = write("c.safetensors",
                 R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[6,14]}})", 14);
  r = rt::bind_weights(two_weights(), kSizes, {c});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors[0].message, "weight `w` in `" + c + "` has 6 bytes, expected 8");
}

TEST_F(Bind, RejectsWeightInTwoFilesAndNoFiles) {
  const std::string h = R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  auto a = write("a.safetensors", h, 16);
  auto b = write("b.safetensors", h, 16);
  auto r = rt::bind_weights(two_weights(), kSizes, {a, b});
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("must be in exactly one file"), std::string::npos);
  r = rt::bind_weights(two_weights(), kSizes, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("no files (pass --weights)"), std::string::npos);
  auto io = rt::bind_weights(two_weights(), kSizes, {dir.file("absent.safetensors")});
  ASSERT_FALSE(io);
  EXPECT_EQ(io.errors[0].kind, ErrorKind::Io);
}

// A weights file that is not a file is refused before it is opened: a FIFO without a
// writer would block the load forever, /dev/zero would be read without end.
TEST_F(Bind, RefusesWeightsThatAreNotFiles) {
  const std::string fifo = dir.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& f : {fifo, std::string("/dev/zero"), dir.path()}) {
    auto r = rt::bind_weights(two_weights(), kSizes, {f});
    ASSERT_FALSE(r) << f;
    EXPECT_EQ(r.errors[0].kind, ErrorKind::Io) << f;
    EXPECT_EQ(r.errors[0].path, f);
    EXPECT_NE(r.errors[0].message.find("weights file "), std::string::npos) << r.errors[0].message;
    EXPECT_NE(r.errors[0].message.find("regular file"), std::string::npos) << r.errors[0].message;
  }
}

}  // namespace
}  // namespace kernrt
