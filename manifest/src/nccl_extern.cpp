// The NCCL built-ins' names and launch shape (see nccl_extern.hpp).
#include "kernrt/manifest/nccl_extern.hpp"

#include <variant>

namespace kernrt::manifest {
namespace {

constexpr const char* kPrefix = "extern:nccl_";

bool integer_scalar(const ParamType& p) {
  return p.kind == ParamType::Kind::I32 || p.kind == ParamType::Kind::I64;
}

std::string tick(const std::string& s) { return "`" + s + "`"; }

}  // namespace

bool is_nccl_entry(const std::string& entry) { return entry.rfind(kPrefix, 0) == 0; }

std::optional<NcclExtern> nccl_extern(const std::string& entry) {
  if (!is_nccl_entry(entry)) return std::nullopt;
  const std::string rest = entry.substr(std::string(kPrefix).size());
  const size_t cut = rest.find('_');
  if (cut == std::string::npos) return std::nullopt;
  const std::string coll = rest.substr(0, cut), elem = rest.substr(cut + 1);
  NcclExtern x;
  if (coll == "allreduce") x.coll = Collective::AllReduce;
  else if (coll == "allgather") x.coll = Collective::AllGather;
  else if (coll == "reducescatter") x.coll = Collective::ReduceScatter;
  else return std::nullopt;
  if (elem == "f32") x.elem = DType::f32;
  else if (elem == "bf16") x.elem = DType::bf16;
  else if (elem == "i32") x.elem = DType::i32;
  else if (elem == "u8") x.elem = DType::u8;
  else return std::nullopt;
  return x;
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::AllGather: return "allgather";
    case Collective::ReduceScatter: return "reducescatter";
  }
  return "?";
}

const char* nccl_extern_names() {
  return "extern:nccl_{allreduce,allgather,reducescatter}_{f32,bf16,i32,u8}";
}

bool nccl_elems(Collective c, uint64_t count, uint64_t world, uint64_t* send, uint64_t* recv) {
  uint64_t all = 0;
  if (__builtin_mul_overflow(count, world, &all)) return false;
  *send = c == Collective::ReduceScatter ? all : count;
  *recv = c == Collective::AllGather ? all : count;
  return true;
}

std::vector<NcclProblem> check_nccl_launch(const std::string& entry,
                                           const std::vector<ParamType>& params,
                                           const std::vector<LaunchArg>* args) {
  std::vector<NcclProblem> out;
  const auto x = nccl_extern(entry);
  if (!x) {
    out.push_back({"entry", -1, "unsupported extern " + tick(entry) + ": the NCCL built-ins are " +
                                 nccl_extern_names()});
    return out;
  }
  if (params.size() != kNcclArity) {
    out.push_back({args ? "args" : "", -1, tick(entry) + " takes [send, recv, count, rank] (4 params), got " +
                                            std::to_string(params.size())});
    return out;
  }
  const std::string want = std::string("buffer<") + to_string(x->elem) + ">";
  const ParamType& send = params[kNcclSend];
  if (send.kind != ParamType::Kind::Buffer || send.dtype != x->elem || send.dir == Direction::out) {
    out.push_back({"params", 0, "the send buffer of " + tick(entry) + " is an `in` (or `inout`) " +
                                    want + ", not " + tick(send.to_string())});
  }
  const ParamType& recv = params[kNcclRecv];
  if (recv.kind != ParamType::Kind::Buffer || recv.dtype != x->elem || recv.dir == Direction::in) {
    out.push_back({"params", 1, "the receive buffer of " + tick(entry) + " is an `out` (or `inout`) " +
                                    want + ", not " + tick(recv.to_string())});
  }
  if (!integer_scalar(params[kNcclCount])) {
    out.push_back({"params", 2, "the element count of " + tick(entry) + " is an i32 or i64, not " +
                                    tick(params[kNcclCount].to_string())});
  }
  if (!integer_scalar(params[kNcclRank])) {
    out.push_back({"params", 3, "the rank of " + tick(entry) + " is an i32 or i64, not " +
                                    tick(params[kNcclRank].to_string())});
  }
  if (args == nullptr || args->size() != kNcclArity ||
      !std::holds_alternative<RankRef>((*args)[kNcclRank])) {
    out.push_back({args && args->size() == kNcclArity ? "args" : "",
                   args && args->size() == kNcclArity ? 3 : -1,
                   tick(entry) + "'s 4th arg must be {\"rank\": \"<group>\"}: it names the topology "
                   "group whose communicator runs the collective"});
  }
  return out;
}

}  // namespace kernrt::manifest
