// program_io's CPU-side request checks (plan.hpp) on a small manifest: program choice, var
// values, buffer kinds and input file sizes. No driver, no files: sizes come from a table.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kernrt/manifest/parse.hpp"
#include "plan.hpp"

namespace {

using kernrt::program_io::Flags;
using kernrt::program_io::make_plan;
using kernrt::program_io::parse_assignment;

// Two programs, a var-sized input, an output, a workspace and a state.
constexpr const char* kManifest = R"({
  "schema_version": 4, "model": "plan-test",
  "vars": {"n": {"max": 4096}},
  "states": {"kv": {"bytes": 256}},
  "buffers": {
    "x": {"dtype": "f32", "shape": ["n"], "kind": "input"},
    "y": {"dtype": "f32", "shape": ["n"], "kind": "output"},
    "w": {"dtype": "u8", "shape": [16], "kind": "workspace"}
  },
  "modules": {"m": {"source": "m.cubin", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}},
  "ops": {"f": {"params": ["in buffer<f32>", "out buffer<f32>"],
                "impl": {"launches": [{"module": "m", "entry": "f", "block": [1, 1, 1], "grid": [1, 1, 1]}]}}},
  "programs": {
    "a": {"calls": [{"op": "f", "args": [{"buf": "x"}, {"buf": "y"}]}]},
    "b": {"calls": [{"op": "f", "args": [{"buf": "x"}, {"buf": "y"}]}]}
  }
})";

std::map<std::string, uint64_t>& sizes() {
  static std::map<std::string, uint64_t> s;
  return s;
}
std::optional<uint64_t> fake_size(const std::string& path, std::string* why) {
  auto it = sizes().find(path);
  if (it == sizes().end()) {
    *why = "does not exist";
    return std::nullopt;
  }
  return it->second;
}
// Output files: any path is writable except those listed here, with their reason.
std::map<std::string, std::string>& unwritable() {
  static std::map<std::string, std::string> s;
  return s;
}
std::optional<std::string> fake_output(const std::string& path) {
  auto it = unwritable().find(path);
  if (it == unwritable().end()) return std::nullopt;
  return it->second;
}
const kernrt::program_io::Files kFake{&fake_size, &fake_output};

kernrt::manifest::Manifest manifest() {
  auto m = kernrt::manifest::parse_manifest(kManifest);
  EXPECT_TRUE(m) << (m.errors.empty() ? "" : m.errors.front().to_string());
  return *m.value;
}

Flags program_a() {
  Flags f;
  f.program = "a";
  return f;
}

// The one error of a rejected plan.
kernrt::Error only_error(const Flags& flags) {
  auto plan = make_plan(manifest(), flags, kFake);
  EXPECT_FALSE(plan);
  EXPECT_EQ(plan.errors.size(), 1u);
  return plan.errors.empty() ? kernrt::Error{} : plan.errors.front();
}

TEST(ProgramIoPlan, ParseAssignmentSplitsAtFirstEquals) {
  std::string why;
  auto a = parse_assignment("x=dir/a=b.bin", &why);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "x");
  EXPECT_EQ(a->value, "dir/a=b.bin");
  for (const char* bad : {"x", "=x.bin", "x="}) {
    EXPECT_FALSE(parse_assignment(bad, &why)) << bad;
    EXPECT_NE(why.find("expected `name=value`"), std::string::npos) << why;
  }
}

TEST(ProgramIoPlan, RequiresProgramWhenSeveral) {
  auto e = only_error(Flags{});
  EXPECT_EQ(e.path, "/programs");
  EXPECT_NE(e.message.find("2 programs (`a`, `b`)"), std::string::npos) << e.message;
}

TEST(ProgramIoPlan, RejectsUnknownProgram) {
  Flags f;
  f.program = "c";
  EXPECT_NE(only_error(f).message.find("unknown program `c`"), std::string::npos);
}

TEST(ProgramIoPlan, RejectsVarAboveMaxAndZero) {
  for (const char* v : {"n=4097", "n=0"}) {
    Flags f = program_a();
    f.vars = {v};
    auto e = only_error(f);
    EXPECT_EQ(e.kind, kernrt::ErrorKind::Caller);
    EXPECT_EQ(e.path, "/vars/n");
    EXPECT_NE(e.message.find("is outside [1, 4096]"), std::string::npos) << e.message;
  }
}

TEST(ProgramIoPlan, RejectsUnknownVarAndNonNumericValue) {
  Flags f = program_a();
  f.vars = {"m=3"};
  EXPECT_NE(only_error(f).message.find("unknown var `m` (declared: `n`)"), std::string::npos);
  f.vars = {"n=-3"};
  EXPECT_NE(only_error(f).message.find("expects an unsigned integer, got `-3`"),
            std::string::npos);
}

TEST(ProgramIoPlan, RejectsInputLargerThanBufferAtTheseVars) {
  sizes()["x44.bin"] = 44;
  Flags f = program_a();
  f.vars = {"n=10"};
  f.inputs = {"x=x44.bin"};
  auto e = only_error(f);
  EXPECT_EQ(e.path, "/buffers/x");
  EXPECT_NE(e.message.find("input `x` holds at most 40 bytes at these vars, file `x44.bin` has 44"),
            std::string::npos)
      << e.message;
  f.vars = {};  // at the max the same file fits
  EXPECT_TRUE(make_plan(manifest(), f, kFake));
}

TEST(ProgramIoPlan, RejectsPartialElement) {
  sizes()["x6.bin"] = 6;
  Flags f = program_a();
  f.inputs = {"x=x6.bin"};
  EXPECT_NE(only_error(f).message.find("f32 elements of 4 bytes, file `x6.bin` has 6 bytes"),
            std::string::npos);
}

TEST(ProgramIoPlan, ChecksBufferKindsPerFlag) {
  sizes()["y.bin"] = 4;
  Flags f = program_a();
  f.inputs = {"y=y.bin"};
  EXPECT_NE(only_error(f).message.find("--in writes input buffers only; `y` is output"),
            std::string::npos);
  f = program_a();
  f.outputs = {"x=x.out"};
  EXPECT_NE(only_error(f).message.find("--out reads output buffers only; `x` is input"),
            std::string::npos);
  f = program_a();
  f.dumps = {"zz=zz.bin"};
  EXPECT_NE(only_error(f).message.find("unknown buffer or state `zz`"), std::string::npos);
}

TEST(ProgramIoPlan, AcceptsDumpsOfBuffersAndStates) {
  sizes()["x40.bin"] = 40;
  Flags f = program_a();
  f.vars = {"n=10"};
  f.inputs = {"x=x40.bin"};
  f.outputs = {"y=y.out"};
  f.dumps = {"w=w.bin", "kv=kv.bin"};
  auto plan = make_plan(manifest(), f, kFake);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan.value->program, "a");
  EXPECT_EQ(plan.value->vars.at("n"), 10u);
  ASSERT_EQ(plan.value->inputs.size(), 1u);
  EXPECT_EQ(plan.value->inputs[0].bytes, 40u);
  ASSERT_EQ(plan.value->dumps.size(), 2u);
  EXPECT_FALSE(plan.value->dumps[0].is_state);
  EXPECT_TRUE(plan.value->dumps[1].is_state);
}

TEST(ProgramIoPlan, FillsNameAStateAndANonEmptyFile) {
  sizes()["pattern.bin"] = 48;
  sizes()["empty.bin"] = 0;
  Flags f = program_a();
  f.fills = {"kv=pattern.bin"};
  auto plan = make_plan(manifest(), f, kFake);
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan.value->fills.size(), 1u);
  EXPECT_EQ(plan.value->fills[0].name, "kv");
  EXPECT_EQ(plan.value->fills[0].bytes, 48u);

  f.fills = {"x=pattern.bin"};
  auto e = only_error(f);
  EXPECT_EQ(e.path, "/buffers/x");
  EXPECT_NE(e.message.find("--fill writes states only; `x` is a buffer (use --in)"),
            std::string::npos) << e.message;
  f.fills = {"zz=pattern.bin"};
  e = only_error(f);
  EXPECT_EQ(e.path, "/states/zz");
  EXPECT_NE(e.message.find("unknown state `zz`"), std::string::npos) << e.message;
  f.fills = {"kv=empty.bin"};
  e = only_error(f);
  EXPECT_NE(e.message.find("is empty"), std::string::npos) << e.message;
  f.fills = {"kv=missing.bin"};
  e = only_error(f);
  EXPECT_EQ(e.kind, kernrt::ErrorKind::Io);
  EXPECT_EQ(e.path, "missing.bin");
}

TEST(ProgramIoPlan, UnreadableInputIsAnIoError) {
  Flags f = program_a();
  f.inputs = {"x=missing.bin"};
  auto e = only_error(f);
  EXPECT_EQ(e.kind, kernrt::ErrorKind::Io);
  EXPECT_EQ(e.path, "missing.bin");
}

TEST(ProgramIoPlan, CollectsEveryProblem) {
  Flags f;
  f.vars = {"n=0", "q=1"};
  f.outputs = {"x=x.out"};
  auto plan = make_plan(manifest(), f, kFake);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.errors.size(), 4u);
}

}  // namespace
