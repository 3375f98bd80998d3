// kernrt-fetch as a user runs it against the fake hub: one line per module saying where it
// is, exit 0 only when every module is present and verified, 1 for a rejected manifest or
// a missing module (nothing fetched for a rejected manifest), 2 for a FILE that is not a
// regular file.
#include <sys/stat.h>

#include <cstdlib>

#include "hub_fixture.hpp"

namespace kernrt::fetch::testing {
namespace {

struct ToolRun {
  int code = -1;
  std::string out, err;
};

class FetchCli : public Hub {
 protected:
  ToolRun run(const std::string& args) {
    const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
    const std::string cmd = "KERNRT_OFFLINE= HF_TOKEN= timeout 30 '" + std::string(KERNRT_FETCH_TOOL) +
                            "' --endpoint " + endpoint_ + " --cache-dir '" + (dir_ / "cache").string() +
                            "' " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    return ToolRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  // A manifest with an hf: module and a local one, each launched once.
  std::string manifest(const std::string& hub_sha, const std::string& local_sha, int schema = 4) {
    const std::string text = R"({"schema_version": )" + std::to_string(schema) + R"(, "model": "fetch-test",
      "buffers": {"out": {"dtype": "u8", "shape": [16], "kind": "output"}},
      "modules": {"hub": {"source": "hf:org/repo/k/good.bin", "sha256": ")" + hub_sha + R"("},
                  "local": {"source": "x.cubin", "sha256": ")" + local_sha + R"("}},
      "ops": {"o": {"params": ["out buffer<u8>"], "impl": {"launches": [
        {"module": "hub", "entry": "a", "block": [32, 1, 1], "grid": [1, 1, 1]},
        {"module": "local", "entry": "b", "block": [32, 1, 1], "grid": [1, 1, 1]}]}}},
      "programs": {"run": {"calls": [{"op": "o", "args": [{"buf": "out"}]}]}}})";
    const std::string path = (dir_ / "m.json").string();
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(FetchCli, FillsTheCacheAndSaysWhereEachModuleIs) {
  const std::string hub = payload(70000, 21), local = "local cubin";
  serve("k/good.bin", hub);
  fs::create_directories(dir_ / "cubins");
  std::ofstream(dir_ / "cubins" / "x.cubin", std::ios::binary) << local;
  const std::string m = manifest(sha256_hex(hub), sha256_hex(local));
  const std::string cubins = " --cubins '" + (dir_ / "cubins").string() + "' ";
  ToolRun r = run(cubins + "'" + m + "'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(m + ": module `hub` (hf:org/repo/k/good.bin): downloaded 70,000 bytes into `" +
                       blob(hub) + "`"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(m + ": module `local` (x.cubin): `" + (dir_ / "cubins" / "x.cubin").string() + "`"),
            std::string::npos)
      << r.out;
  r = run(cubins + "--offline '" + m + "'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("module `hub` (hf:org/repo/k/good.bin): in the cache `"), std::string::npos) << r.out;
}

TEST_F(FetchCli, MissingModulesExitOne) {
  const std::string hub = payload(1000, 22);
  const std::string m = manifest(sha256_hex(hub), sha256_hex("absent"));  // hub file not served
  ToolRun r = run("'" + m + "'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("/modules/hub: `" + endpoint_ + "/org/repo/resolve/main/k/good.bin`: HTTP 404"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("/modules/local: a local module is not downloaded"), std::string::npos) << r.err;
}

TEST_F(FetchCli, RejectedManifestFetchesNothing) {
  const std::string hub = payload(1000, 23);
  serve("k/good.bin", hub);
  ToolRun r = run("'" + manifest(sha256_hex(hub), sha256_hex("x"), 3) + "'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("manifest failed verification, nothing fetched:\n  - /schema_version"), std::string::npos)
      << r.out;
  EXPECT_EQ(requests(), 0u);
}

TEST_F(FetchCli, FilesThatAreNotFilesExitTwo) {
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ToolRun r = run("'" + fifo + "'");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(fifo + ": is a FIFO, not a regular file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kernrt::fetch::testing
