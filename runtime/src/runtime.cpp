// Runtime API entry points (runtime.hpp). Interim: the driver check is real; loading
// reports that the executor is not linked in yet, so callers can build against the API.
#include "kernrt/runtime.hpp"

#include "driver.hpp"

namespace kernrt {

struct Runtime::Impl {};

bool device_available(std::string* why) {
  auto api = rt::driver();
  if (!api) {
    if (why) *why = api.errors.front().message;
    return false;
  }
  return true;
}

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Result<std::unique_ptr<Runtime>> Runtime::load(const manifest::Verified&, const LoadOptions&) {
  auto api = rt::driver();
  if (!api) return Result<std::unique_ptr<Runtime>>::fail(api.errors);
  return Result<std::unique_ptr<Runtime>>::fail(
      Error{ErrorKind::Driver, "", "the executor is not part of this build"});
}

static Error unloaded() { return Error{ErrorKind::Caller, "", "runtime is not loaded"}; }
std::optional<Error> Runtime::write_input(const std::string&, const void*, size_t) { return unloaded(); }
std::optional<Error> Runtime::write_buffer(const std::string&, const void*, size_t) { return unloaded(); }
std::optional<Error> Runtime::write_state(const std::string&, const void*, size_t) { return unloaded(); }
std::optional<Error> Runtime::run(const std::string&, const std::map<std::string, uint64_t>&, bool) { return unloaded(); }
std::optional<Error> Runtime::read_output(const std::string&, std::vector<uint8_t>*) { return unloaded(); }
std::optional<Error> Runtime::read_buffer(const std::string&, std::vector<uint8_t>*) { return unloaded(); }
std::optional<Error> Runtime::read_state(const std::string&, std::vector<uint8_t>*) { return unloaded(); }
Result<TimingStats> Runtime::time(const std::string&, const std::map<std::string, uint64_t>&, bool, int) {
  return Result<TimingStats>::fail(unloaded());
}
size_t Runtime::buffer_bytes(const std::string&) const { return 0; }
size_t Runtime::state_bytes(const std::string&) const { return 0; }
uint64_t Runtime::buffer_address(const std::string&) const { return 0; }
uint64_t Runtime::state_address(const std::string&) const { return 0; }
std::vector<std::string> Runtime::programs() const { return {}; }
size_t Runtime::launch_count(const std::string&) const { return 0; }
size_t Runtime::graph_cache_size() const { return 0; }

}  // namespace kernrt
