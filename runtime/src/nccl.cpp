// libnccl.so.2 opened at run time for the collective built-ins (see nccl.hpp).
#include "nccl.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace kernrt::rt {
namespace {

// nccl.h's ABI (see nccl.hpp): enums are ints, the comm and stream opaque pointers.
using ncclResult = int;
using ncclComm = void*;
constexpr int kNcclSuccess = 0;
constexpr int kNcclSum = 0;
constexpr int kNcclUint8 = 1, kNcclInt32 = 2, kNcclFloat32 = 7, kNcclBfloat16 = 9;

int nccl_type(manifest::DType t) {
  switch (t) {
    case manifest::DType::u8: return kNcclUint8;
    case manifest::DType::i32: return kNcclInt32;
    case manifest::DType::bf16: return kNcclBfloat16;
    default: return kNcclFloat32;  // the verifier admits f32, bf16, i32, u8 only
  }
}

template <class Fn>
bool sym(void* lib, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  return *out != nullptr;
}

}  // namespace

struct Nccl::Api {
  void* lib = nullptr;
  ncclResult (*get_unique_id)(NcclUniqueId*) = nullptr;
  ncclResult (*comm_init_rank)(ncclComm*, int, NcclUniqueId, int) = nullptr;
  ncclResult (*comm_destroy)(ncclComm) = nullptr;
  ncclResult (*all_reduce)(const void*, void*, size_t, int, int, ncclComm, CUstream) = nullptr;
  ncclResult (*all_gather)(const void*, void*, size_t, int, ncclComm, CUstream) = nullptr;
  ncclResult (*reduce_scatter)(const void*, void*, size_t, int, int, ncclComm, CUstream) = nullptr;
  ncclResult (*group_start)() = nullptr;
  ncclResult (*group_end)() = nullptr;
  const char* (*error_string)(ncclResult) = nullptr;
  ~Api() {
    if (lib) dlclose(lib);
  }
};

void keep_nvlink_multicast_off() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

std::vector<std::string> Nccl::default_candidates() {
  std::vector<std::string> c;
  if (const char* env = std::getenv("KERNRT_NCCL")) c.push_back(env);
  c.push_back("libnccl.so.2");
  if (const char* home = std::getenv("CUDA_HOME")) {
    c.push_back(std::string(home) + "/lib/libnccl.so.2");
    c.push_back(std::string(home) + "/lib64/libnccl.so.2");
  }
  c.push_back("/usr/local/cuda/lib/libnccl.so.2");
  c.push_back("/usr/local/cuda/lib64/libnccl.so.2");
  return c;
}

Result<std::unique_ptr<Nccl>> Nccl::open(const std::vector<std::string>& candidates) {
  using R = Result<std::unique_ptr<Nccl>>;
  keep_nvlink_multicast_off();  // before NCCL's first call reads its environment
  auto api = std::make_unique<Api>();
  std::string tried, found;
  for (const auto& path : candidates.empty() ? default_candidates() : candidates) {
    api->lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->lib) {
      found = path;
      break;
    }
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + path + " (" + (why ? why : "?") + ")";
  }
  if (!api->lib) {
    return R::fail(Error{ErrorKind::Driver, "",
                         "the NCCL collectives (extern:nccl_*) need libnccl.so.2, which is not "
                         "installed where kernrt looks (set KERNRT_NCCL to its path): tried " + tried});
  }
  std::string missing;
  auto need = [&](const char* name, auto* out) {
    if (!sym(api->lib, name, out)) missing += (missing.empty() ? "`" : ", `") + std::string(name) + "`";
  };
  need("ncclGetUniqueId", &api->get_unique_id);
  need("ncclCommInitRank", &api->comm_init_rank);
  need("ncclCommDestroy", &api->comm_destroy);
  need("ncclAllReduce", &api->all_reduce);
  need("ncclAllGather", &api->all_gather);
  need("ncclReduceScatter", &api->reduce_scatter);
  need("ncclGroupStart", &api->group_start);
  need("ncclGroupEnd", &api->group_end);
  need("ncclGetErrorString", &api->error_string);
  if (!missing.empty()) {
    return R::fail(Error{ErrorKind::Driver, "", "`" + found + "` lacks entry points " + missing});
  }
  std::unique_ptr<Nccl> n(new Nccl());
  n->api_ = std::move(api);
  n->library_ = found;
  return R::ok(std::move(n));
}

Nccl::~Nccl() = default;

Nccl::Comm::~Comm() {
  if (comm_ && nccl_) nccl_->api_->comm_destroy(comm_);
}

std::optional<Error> Nccl::failed(int rc, const std::string& what, const std::string& where) const {
  if (rc == kNcclSuccess) return std::nullopt;
  const char* text = api_->error_string ? api_->error_string(rc) : nullptr;
  return Error{ErrorKind::Driver, where, "`" + what + "` failed: ncclResult " + std::to_string(rc) +
                                             (text ? " (" + std::string(text) + ")" : std::string())};
}

Result<NcclUniqueId> Nccl::unique_id() const {
  NcclUniqueId id{};
  if (auto e = failed(api_->get_unique_id(&id), "ncclGetUniqueId", "")) {
    return Result<NcclUniqueId>::fail(std::move(*e));
  }
  return Result<NcclUniqueId>::ok(id);
}

Result<std::unique_ptr<Nccl::Comm>> Nccl::init_rank(uint64_t world, const NcclUniqueId& id,
                                                    uint64_t rank, const std::string& where) const {
  using R = Result<std::unique_ptr<Comm>>;
  if (world == 0 || world > INT32_MAX || rank >= world) {
    return R::fail(Error{ErrorKind::Caller, where, "rank " + std::to_string(rank) +
                                                       " is outside a group of " + std::to_string(world)});
  }
  ncclComm comm = nullptr;
  if (auto e = failed(api_->comm_init_rank(&comm, static_cast<int>(world), id, static_cast<int>(rank)),
                      "ncclCommInitRank", where)) {
    return R::fail(std::move(*e));
  }
  std::unique_ptr<Comm> c(new Comm());
  c->nccl_ = this;
  c->comm_ = comm;
  c->world_ = world;
  return R::ok(std::move(c));
}

std::optional<Error> Nccl::group_start() const { return failed(api_->group_start(), "ncclGroupStart", ""); }
std::optional<Error> Nccl::group_end() const { return failed(api_->group_end(), "ncclGroupEnd", ""); }

std::optional<Error> Nccl::collective(const Comm& comm, manifest::Collective coll, manifest::DType elem,
                                      uint64_t send, uint64_t recv, uint64_t count, CUstream stream,
                                      const std::string& where) const {
  if (count == 0) return std::nullopt;  // nothing to move; NCCL would still launch
  const void* s = reinterpret_cast<const void*>(send);
  void* r = reinterpret_cast<void*>(recv);
  const int t = nccl_type(elem);
  switch (coll) {
    case manifest::Collective::AllReduce:
      return failed(api_->all_reduce(s, r, count, t, kNcclSum, comm.comm_, stream), "ncclAllReduce", where);
    case manifest::Collective::AllGather:
      return failed(api_->all_gather(s, r, count, t, comm.comm_, stream), "ncclAllGather", where);
    case manifest::Collective::ReduceScatter:
      return failed(api_->reduce_scatter(s, r, count, t, kNcclSum, comm.comm_, stream),
                    "ncclReduceScatter", where);
  }
  return std::nullopt;
}

}  // namespace kernrt::rt
