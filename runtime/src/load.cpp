// Runtime::load (reference/kern-schema.md §3.1): everything that can fail without a GPU
// runs first (supported features, memory plan, weight binding, module lookup by hash),
// so those errors are the same on any machine; then the driver: primary context, one
// non-blocking compute stream (never the legacy stream, which cannot be captured),
// allocations zeroed on the stream, weights copied, modules loaded from verified bytes,
// programs lowered with tensormaps encoded by the driver, functions resolved and their
// ABI compared with cuFuncGetParamInfo, shared memory opt-in above 48 KiB; last, every
// `once` program runs one time. A host shared library's fatbin containers (fatbin.hpp)
// are each loaded; a container that does not load on this device is skipped, and an entry
// is looked up in each loaded container in file order until one matches the declared ABI.
#include <fstream>
#include <optional>

#include "kernrt/manifest/expr.hpp"
#include "kernrt/manifest/registry.hpp"
#include "fatbin.hpp"
#include "module_store.hpp"
#include "peers.hpp"
#include "runtime_impl.hpp"
#include "safetensors.hpp"
#include "tensormap.hpp"

namespace kernrt {
namespace {

using LoadResult = Result<std::unique_ptr<Runtime>>;
using ImplResult = Result<std::unique_ptr<Runtime::Impl>>;

ImplResult load_impl(const manifest::Verified& verified, const LoadOptions& options);

std::string sizes_list(const std::vector<uint32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// 48 KiB: the dynamic shared memory a kernel gets without opting in.
constexpr uint64_t kDefaultSharedMem = 48 * 1024;

std::optional<Error> copy_weight(Runtime::Impl& im, const std::string& name,
                                 const rt::WeightSource& src) {
  std::ifstream in(src.file, std::ios::binary);
  std::vector<char> bytes(src.bytes);
  in.seekg(static_cast<std::streamoff>(src.offset));
  if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(src.bytes))) {
    return Error{ErrorKind::Io, src.file, "cannot read weight `" + name + "` from `" + src.file + "`"};
  }
  const CUdeviceptr dst = im.alloc.buffers.at(name).address;
  if (auto e = im.check(im.api->cuMemcpyHtoDAsync(dst, bytes.data(), bytes.size(), im.stream),
                        "cuMemcpyHtoDAsync", json_pointer_append("/buffers", name))) {
    return e;
  }
  return im.sync("weight upload");  // `bytes` must outlive the copy
}

}  // namespace

Result<std::unique_ptr<Runtime>> Runtime::load(const manifest::Verified& verified,
                                               const LoadOptions& options) {
  // No exception crosses the API: allocation failures and the like become an error.
  try {
    auto im = load_impl(verified, options);
    if (!im) return LoadResult::fail(std::move(im.errors));
    std::unique_ptr<Runtime> rt(new Runtime(std::move(*im.value)));
    // `once` programs run once after load (kern-schema §1.14), eagerly, every var at its max.
    const auto max = manifest::vars_at_max(verified.manifest());
    for (const auto& [name, program] : verified.manifest().programs) {
      if (!program.once.value_or(false)) continue;
      if (auto e = rt->run(name, max)) {
        e->message = "`once` program `" + name + "` failed after load: " + e->message;
        return LoadResult::fail(std::move(*e));
      }
    }
    return LoadResult::ok(std::move(rt));
  } catch (const std::exception& ex) {
    return LoadResult::fail(Error{ErrorKind::Driver, "", std::string("load failed: ") + ex.what()});
  }
}

namespace {

ImplResult load_impl(const manifest::Verified& verified, const LoadOptions& options) {
  const manifest::Manifest& m = verified.manifest();

  // ---- checks that need no GPU -------------------------------------------------------
  Errors errors;
  auto ranks = rt::resolve_ranks(m, options.ranks, options.rendezvous);
  if (!ranks) errors = ranks.errors;
  for (auto& e : rt::check_supported(m)) errors.push_back(std::move(e));
  auto plan = rt::plan_memory(m, options.token_capacity, options.seq_slots);
  if (!plan) errors.insert(errors.end(), plan.errors.begin(), plan.errors.end());
  std::map<std::string, rt::WeightSource> weights;
  if (plan) {
    auto bound = rt::bind_weights(m, plan.value->buffers, options.weight_files);
    if (!bound) errors.insert(errors.end(), bound.errors.begin(), bound.errors.end());
    else weights = std::move(*bound.value);
  }
  const std::string cache = options.cache_dir.empty() ? kernrt::default_cache_dir() : options.cache_dir;
  auto store = rt::ModuleStore::open(options.cubin_dirs, cache);
  std::map<std::string, std::vector<rt::ModuleImage>> module_images;
  std::map<std::string, std::string> module_files;
  for (const auto& [name, module] : m.modules) {
    const std::string path = json_pointer_append("/modules", name);
    std::string from;
    auto bytes = store.load(name, module, path, &from);
    if (!bytes) {
      errors.insert(errors.end(), bytes.errors.begin(), bytes.errors.end());
      continue;
    }
    auto images = rt::module_images(*bytes.value, path, "module `" + shortened(name) + "` (`" + from + "`)");
    if (!images) {
      errors.insert(errors.end(), images.errors.begin(), images.errors.end());
      continue;
    }
    module_images.emplace(name, std::move(*images.value));
    module_files.emplace(name, from);
  }
  if (!errors.empty()) return ImplResult::fail(std::move(errors));

  // ---- driver, context, stream ------------------------------------------------------------
  auto api = rt::driver();
  if (!api) return ImplResult::fail(api.errors);
  auto im = std::make_unique<Runtime::Impl>();
  im->api = *api.value;
  im->manifest = m;
  im->plan = std::move(*plan.value);
  im->module_files = std::move(module_files);
  im->ranks = std::move(*ranks.value);
  const auto& d = *im->api;
  auto fail = [](Error e) { return ImplResult::fail(std::move(e)); };
  int count = 0;
  if (auto e = im->check(d.cuDeviceGetCount(&count), "cuDeviceGetCount")) return fail(*e);
  if (options.gpu < 0 || options.gpu >= count) {
    return fail(Error{ErrorKind::Caller, "", "gpu " + std::to_string(options.gpu) +
                                             " does not exist: " + std::to_string(count) +
                                             " device(s) visible"});
  }
  if (auto e = im->check(d.cuDeviceGet(&im->device, options.gpu), "cuDeviceGet")) return fail(*e);
  if (auto e = im->check(d.cuDevicePrimaryCtxRetain(&im->ctx, im->device),
                         "cuDevicePrimaryCtxRetain")) {
    return fail(*e);
  }
  im->ctx_retained = true;
  if (auto e = im->bind()) return fail(*e);
  if (auto e = im->check(d.cuStreamCreate(&im->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")) {
    return fail(*e);
  }
  // The two events that order the compute stream with a caller's stream (exec.cpp).
  for (CUevent* ev : {&im->compute_done, &im->foreign_done}) {
    if (auto e = im->check(d.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate")) {
      return fail(*e);
    }
  }

  // A plan that cannot fit fails with the numbers instead of a bare out-of-memory.
  size_t free_bytes = 0, total_bytes = 0;
  if (auto e = im->check(d.cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo")) return fail(*e);
  if (im->plan.device_bytes() > free_bytes) {
    return fail(Error{ErrorKind::Caller, "",
                      "the memory plan needs " + std::to_string(im->plan.device_bytes()) +
                          " device bytes but gpu " + std::to_string(options.gpu) + " has " +
                          std::to_string(free_bytes) + " free: lower the token capacity (" +
                          std::to_string(im->plan.token_capacity) + ") or the sequence slots (" +
                          std::to_string(im->plan.seq_slots) + ")"});
  }

  // ---- cuBLASLt for the GEMM built-ins, with a workspace of its own --------------------------
  if (rt::uses_gemm(m)) {
    auto blas = rt::Blas::open();
    if (!blas) return ImplResult::fail(blas.errors);
    im->blas = std::move(*blas.value);
    CUdeviceptr ws = 0;
    if (auto e = im->check(d.cuMemAlloc(&ws, rt::Blas::kWorkspaceBytes), "cuMemAlloc (cuBLASLt workspace)")) {
      return fail(*e);
    }
    im->device_allocations.push_back(ws);
    im->blas->set_workspace(ws, rt::Blas::kWorkspaceBytes);
  }

  // ---- the ranks meet: same manifest everywhere before anything is allocated ------------
  std::optional<rt::Rendezvous> rendezvous;
  if (rt::multi_rank(m)) {
    rendezvous.emplace(options.rendezvous, options.rendezvous_timeout_s);
    if (auto e = rt::agree_on_manifest(*rendezvous, m, im->ranks)) return fail(*e);
  }
  const rt::Rendezvous* rv = rendezvous ? &*rendezvous : nullptr;

  // ---- NCCL for the collective built-ins: one communicator per group, at this rank -------
  // Every rank joins the groups in the same (sorted) order; init_rank blocks until the
  // whole group has joined.
  if (const auto groups = rt::nccl_groups(m); !groups.empty()) {
    auto nccl = rt::Nccl::open();
    if (!nccl) return ImplResult::fail(nccl.errors);
    im->nccl = std::move(*nccl.value);
    for (const std::string& group : groups) {
      const std::string path = json_pointer_append("/topology/groups", group);
      const uint64_t world = m.topology->groups.at(group);
      const uint64_t rank = im->ranks.at(group);
      auto id = rt::nccl_group_id(rv, *im->nccl, group, rank, world);
      if (!id) return ImplResult::fail(id.errors);
      auto comm = im->nccl->init_rank(world, *id.value, rank, path);
      if (!comm) return ImplResult::fail(comm.errors);
      im->comms.emplace(group, std::move(*comm.value));
    }
  }

  // ---- allocations, zeroed ---------------------------------------------------------------------
  // What other ranks map comes from the virtual-memory API (exportable), the rest from cuMemAlloc.
  auto allocate = [&](uint64_t bytes, const std::string& path, rt::Region* out,
                      bool exportable = false) -> std::optional<Error> {
    CUdeviceptr p = 0;
    if (exportable) {
      auto a = rt::vmm_create(d, im->device, bytes, path);
      if (!a) return a.errors.front();
      im->vmm.push_back(*a.value);
      p = a.value->address;
    } else {
      if (auto e = im->check(d.cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc", path)) {
        e->message += " (" + std::to_string(bytes) + " bytes)";
        return e;
      }
      im->device_allocations.push_back(p);
    }
    *out = rt::Region{p, bytes};
    return im->check(d.cuMemsetD8Async(p, 0, bytes, im->stream), "cuMemsetD8Async", path);
  };
  const rt::VmmObjects shared = rt::vmm_objects(m);
  for (const auto& [name, bytes] : im->plan.buffers) {
    if (auto e = allocate(bytes, json_pointer_append("/buffers", name), &im->alloc.buffers[name],
                          shared.buffers.count(name) != 0)) {
      return fail(*e);
    }
  }
  for (const auto& [name, bytes] : im->plan.states) {
    if (auto e = allocate(bytes, json_pointer_append("/states", name), &im->alloc.states[name],
                          shared.states.count(name) != 0)) {
      return fail(*e);
    }
  }
  for (const auto& [op, scratch] : im->plan.scratch) {
    for (const auto& [name, bytes] : scratch) {
      const std::string path = "/ops/" + op + "/impl/scratch/" + name;
      if (auto e = allocate(bytes, path, &im->alloc.scratch[op][name])) return fail(*e);
    }
  }
  for (const auto& [name, bytes] : im->plan.staging) {
    void* host = nullptr;
    if (auto e = im->check(d.cuMemAllocHost(&host, bytes ? bytes : 1), "cuMemAllocHost",
                           json_pointer_append("/buffers", name))) {
      return fail(*e);
    }
    im->staging[name] = host;
  }
  for (const auto& [name, src] : weights) {
    if (auto e = copy_weight(*im, name, src)) return fail(*e);
  }
  // Every rank's allocations exist now: the peer buffers take their addresses.
  if (auto e = rt::fill_peer_buffers(*im, rv)) return fail(*e);

  // ---- modules from verified bytes ----------------------------------------------------------
  std::map<std::string, std::vector<CUmodule>> by_sha;
  for (const auto& [name, images] : module_images) {
    const std::string& sha = m.modules.at(name).sha256;
    auto hit = by_sha.find(sha);
    if (hit != by_sha.end()) {
      im->modules[name] = hit->second;
      continue;
    }
    std::vector<CUmodule> mods;
    std::optional<Error> first_failure;
    for (const rt::ModuleImage& image : images) {
      CUmodule mod = nullptr;
      auto e = im->check(d.cuModuleLoadData(&mod, image.data()), "cuModuleLoadData",
                         json_pointer_append("/modules", name));
      if (e) {
        // A container built for another architecture: the others may still hold the entry.
        if (!first_failure) first_failure = e;
        continue;
      }
      im->loaded.push_back(mod);
      mods.push_back(mod);
    }
    if (mods.empty()) {
      first_failure->kind = ErrorKind::Artifact;
      first_failure->message = "module `" + name + "` does not load on this device" +
                               (images.size() > 1 ? " (none of its " + std::to_string(images.size()) +
                                                        " fatbin containers loads)"
                                                  : std::string()) +
                               ": " + first_failure->message;
      return fail(*first_failure);
    }
    by_sha[sha] = mods;
    im->modules[name] = std::move(mods);
  }

  // ---- lowering (tensormaps encoded here) ----------------------------------------------------
  rt::DriverTensorMapEncoder encoder(d);
  auto lowered = rt::lower(m, im->alloc, encoder, &im->ranks);
  if (!lowered) return ImplResult::fail(std::move(lowered.errors));
  im->lowered = std::move(*lowered.value);

  // ---- functions: ABI check and shared-memory opt-in ------------------------------------------
  for (size_t f = 0; f < im->lowered.functions.size(); ++f) {
    const rt::FunctionKey& key = im->lowered.functions[f];
    const std::string& path = im->lowered.function_paths[f];
    // The first image that has the entry with the declared param sizes wins (one image for
    // a cubin; a host library's containers in file order).
    CUfunction fn = nullptr;
    std::optional<Error> missing, mismatch;
    for (CUmodule mod : im->modules.at(key.module)) {
      CUfunction candidate = nullptr;
      CUresult rc = d.cuModuleGetFunction(&candidate, mod, key.entry.c_str());
      if (rc != CUDA_SUCCESS) {
        if (!missing) {
          missing = Error{ErrorKind::Artifact, path + "/entry",
                          "entry `" + key.entry + "` is not in module `" + key.module +
                              "` (sha256 `" + m.modules.at(key.module).sha256 + "`): " +
                              rt::driver_error(d, rc, "cuModuleGetFunction").message};
        }
        continue;
      }
      if (d.cuFuncGetParamInfo) {
        std::vector<uint32_t> seen;
        for (size_t i = 0;; ++i) {
          size_t offset = 0, size = 0;
          if (d.cuFuncGetParamInfo(candidate, i, &offset, &size) != CUDA_SUCCESS) break;
          seen.push_back(static_cast<uint32_t>(size));
        }
        if (seen != key.param_sizes) {
          if (!mismatch) {
            mismatch = Error{ErrorKind::Artifact, path,
                             "entry `" + key.entry + "` in module `" + key.module +
                                 "` has no instance matching the declared param layout " +
                                 sizes_list(key.param_sizes) + "; saw " + sizes_list(seen)};
          }
          continue;
        }
      }
      fn = candidate;
      break;
    }
    if (fn == nullptr) return fail(mismatch ? *mismatch : *missing);
    const uint64_t smem = im->lowered.shared_mem_max[f];
    if (smem > kDefaultSharedMem) {
      if (auto e = im->check(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                  static_cast<int>(smem)),
                             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, " +
                                 std::to_string(smem) + ")",
                             path + "/shared_mem")) {
        return fail(*e);
      }
    }
    // Clusters above 8 blocks are "non-portable" and must be allowed per function.
    if (im->lowered.cluster_max[f] > 8) {
      if (auto e = im->check(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                             "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)", path + "/cluster")) {
        return fail(*e);
      }
    }
    im->functions.push_back(fn);
  }

  // ---- per-launch parameter storage ------------------------------------------------------
  for (const auto& [name, p] : im->lowered.programs) {
    Runtime::Impl::Program prog;
    prog.name = name;
    prog.plan = &p;
    for (const auto& launch : p.launches) {
      Runtime::Impl::LaunchArgs la;
      la.scalars.assign(launch.args.size(), 0);
      for (const auto& pack : launch.packs) la.images.emplace_back(pack.size, 0);
      for (size_t a = 0; a < launch.args.size(); ++a) {
        const auto& arg = launch.args[a];
        la.params.push_back(arg.is_pack ? static_cast<void*>(la.images[arg.pack].data())
                                        : static_cast<void*>(&la.scalars[a]));
      }
      prog.args.push_back(std::move(la));
    }
    im->programs.push_back(std::move(prog));
  }
  im->dense.assign(im->lowered.vars.names.size(), 1);
  im->bound.assign(im->lowered.bindable.size(), 0);
  const auto* api_table = im->api;
  im->graphs = std::make_unique<rt::GraphCache>(
      options.graph_cache_capacity ? options.graph_cache_capacity : kDefaultGraphCacheCapacity,
      [api_table](rt::GraphCache::Handle h) {
        api_table->cuGraphExecDestroy(static_cast<CUgraphExec>(h));
      });
  if (auto e = im->sync("load")) return fail(*e);
  return ImplResult::ok(std::move(im));
}

}  // namespace

}  // namespace kernrt
