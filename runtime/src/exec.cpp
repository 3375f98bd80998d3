// Execution (reference/kern-schema.md §3.4-3.6): var validation into dense values, eager
// launches through cuLaunchKernelEx on the compute stream, graph capture/replay through
// the LRU cache, timing with CUDA events, and the Impl teardown.
//
// Pack images are rewritten into per-launch storage before each launch; the driver copies
// kernel parameters when a launch is enqueued or captured, so a captured graph keeps the
// images of its key and a later eager run cannot disturb it. Capture is always ended,
// even when a launch fails, so the stream never stays in capture mode. The replay path
// (cache hit) neither allocates nor throws.
//
// Streams: a program runs on the runtime's own compute stream or on a caller's stream.
// Work on the two is ordered with two events (runtime_impl.hpp): a caller's stream waits
// for the compute stream's pending copies before its first launch, and the compute stream
// waits for the caller's launches before its next copy or run. While the caller's stream
// is being captured (torch.cuda.graph, cudaStreamBeginCapture) only the launches are
// issued, so they become part of the caller's graph; a runtime graph cannot be nested.
//
// Bound calls (enqueue_bound): the caller's device memory stands in for whole buffers for
// one eager call. The lowered plan recorded where each buffer's address was written (a
// pointer arg, a pack field, a tensormap's global address); those places are rewritten in
// the per-launch storage after the usual image write, so the next unbound call (which
// rewrites every image from its base) is unaffected.
#include <algorithm>
#include <cstring>

#include "runtime_impl.hpp"

namespace kernrt {

Runtime::Impl::~Impl() {
  if (api == nullptr) return;
  if (ctx) api->cuCtxSetCurrent(ctx);
  if (stream && foreign_pending) api->cuStreamWaitEvent(stream, foreign_done, 0);
  if (stream) api->cuStreamSynchronize(stream);
  graphs.reset();
  blas.reset();
  comms.clear();
  nccl.reset();
  for (CUevent ev : {compute_done, foreign_done}) {
    if (ev) api->cuEventDestroy(ev);
  }
  for (CUmodule m : loaded) api->cuModuleUnload(m);
  for (auto& [name, host] : staging) api->cuMemFreeHost(host);
  for (CUdeviceptr p : device_allocations) api->cuMemFree(p);
  for (auto& a : vmm) rt::vmm_release(*api, &a);
  if (stream) api->cuStreamDestroy(stream);
  if (ctx_retained) api->cuDevicePrimaryCtxRelease(device);
}

std::optional<Error> Runtime::Impl::check(CUresult rc, const std::string& what,
                                          const std::string& path) {
  return rt::check(*api, rc, what, path);
}

std::optional<Error> Runtime::Impl::bind() { return check(api->cuCtxSetCurrent(ctx), "cuCtxSetCurrent"); }

std::optional<Error> Runtime::Impl::join_foreign() {
  if (!foreign_pending) return std::nullopt;
  foreign_pending = false;
  return check(api->cuStreamWaitEvent(stream, foreign_done, 0), "cuStreamWaitEvent");
}

std::optional<Error> Runtime::Impl::sync(const char* what) {
  if (auto e = join_foreign()) return e;
  CUresult rc = api->cuStreamSynchronize(stream);
  if (rc == CUDA_SUCCESS) {
    compute_dirty = false;
    return std::nullopt;
  }
  return rt::driver_error(*api, rc, std::string("cuStreamSynchronize (") + what + ")");
}

std::optional<Error> Runtime::Impl::prepare(const std::string& program,
                                            const std::map<std::string, uint64_t>& vars,
                                            uint32_t* index) {
  auto it = std::lower_bound(programs.begin(), programs.end(), program,
                             [](const Program& p, const std::string& n) { return p.name < n; });
  if (it == programs.end() || it->name != program) {
    return Error{ErrorKind::Caller, json_pointer_append("/programs", program),
                 "unknown program `" + program + "`"};
  }
  *index = static_cast<uint32_t>(it - programs.begin());
  return rt::dense_vars(lowered.vars, it->plan->reads, program, vars, dense.data());
}

std::optional<Error> Runtime::Impl::relocate_launch(const rt::LaunchPlan& launch, LaunchArgs& la) {
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const rt::LaunchArgPlan& arg = launch.args[a];
    if (!arg.is_pack && arg.buffer >= 0 && bound[arg.buffer]) {
      la.scalars[a] = bound[arg.buffer] + arg.offset;
    }
  }
  for (size_t p = 0; p < launch.packs.size(); ++p) {
    uint8_t* image = la.images[p].data();
    for (const rt::Relocation& r : launch.packs[p].relocations) {
      const uint64_t base = bound[r.buffer];
      if (base == 0) continue;
      if (!r.tensormap) {
        rt::store_le(image + r.at, base + r.offset, r.width);
        continue;
      }
      CUtensorMap map;  // the driver call wants an aligned descriptor
      std::memcpy(&map, image + r.at, sizeof map);
      void* address = reinterpret_cast<void*>(base + r.offset);
      if (auto e = check(api->cuTensorMapReplaceAddress(&map, address), "cuTensorMapReplaceAddress")) {
        e->path = launch.path;
        e->message += " for bound `" + lowered.bindable[r.buffer] + "` in call " + launch.call;
        return e;
      }
      std::memcpy(image + r.at, &map, sizeof map);
    }
  }
  return std::nullopt;
}

// A built-in's (GEMM, NCCL) arguments: evaluated at the dense vars into la.scalars (up to the
// first that does not evaluate), then, for a bound call, the caller's addresses put in.
std::optional<Error> Runtime::Impl::builtin_args(const rt::LaunchPlan& launch, LaunchArgs& la,
                                                 const uint64_t* dv, bool relocate) {
  for (size_t a = 0; a < launch.args.size(); ++a) {
    if (!launch.args[a].value.eval(dv, &la.scalars[a])) {
      return Error{ErrorKind::Caller, launch.path, "an argument of call " + launch.call +
                                                       " does not evaluate at these vars"};
    }
  }
  return relocate ? relocate_launch(launch, la) : std::nullopt;
}

std::optional<Error> Runtime::Impl::enqueue(uint32_t index, CUstream s, bool relocate) {
  Program& prog = programs[index];
  const uint64_t* dv = dense.data();
  for (size_t l = 0; l < prog.plan->launches.size(); ++l) {
    const rt::LaunchPlan& launch = prog.plan->launches[l];
    LaunchArgs& la = prog.args[l];
    if (launch.nccl) {
      if (auto e = builtin_args(launch, la, dv, relocate)) return e;
      const rt::NcclPlan& n = *launch.nccl;
      auto comm = comms.find(n.group);
      if (comm == comms.end() || !nccl) {
        return Error{ErrorKind::Caller, launch.path, "no communicator for group `" + n.group + "`"};
      }
      if (auto e = nccl->collective(*comm->second, n.coll, n.elem, la.scalars[manifest::kNcclSend],
                                    la.scalars[manifest::kNcclRecv], la.scalars[manifest::kNcclCount],
                                    s, launch.path)) {
        e->message += " in call " + launch.call;
        return e;
      }
      continue;
    }
    if (launch.gemm) {
      if (auto e = builtin_args(launch, la, dv, relocate)) return e;
      const rt::GemmShape shape = rt::gemm_shape(la.scalars.data(), launch.args.size());
      if (auto e = blas->gemm(*launch.gemm, shape, la.scalars[rt::kGemmA], la.scalars[rt::kGemmW],
                              la.scalars[rt::kGemmC], s, launch.path)) {
        e->message += " in call " + launch.call;
        return e;
      }
      continue;
    }
    uint64_t grid[3] = {0, 0, 0};
    uint64_t smem = 0;
    bool ok = launch.shared_mem.eval(dv, &smem);
    for (int d = 0; d < 3; ++d) ok = ok && launch.grid[d].eval(dv, &grid[d]);
    for (size_t a = 0; ok && a < launch.args.size(); ++a) {
      const rt::LaunchArgPlan& arg = launch.args[a];
      if (arg.is_pack) {
        ok = launch.packs[arg.pack].write(dv, la.images[arg.pack].data());
      } else {
        ok = arg.value.eval(dv, &la.scalars[a]);
      }
    }
    if (!ok || grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || grid[0] > UINT32_MAX ||
        grid[1] > UINT32_MAX || grid[2] > UINT32_MAX || smem > UINT32_MAX) {
      return Error{ErrorKind::Caller, launch.path,
                   "launch geometry or an argument of call " + launch.call +
                       " does not evaluate to a launchable value at these vars"};
    }
    if (relocate) {
      if (auto e = relocate_launch(launch, la)) return e;
    }
    CUlaunchAttribute attrs[2];
    unsigned n_attrs = 0;
    if (launch.cluster) {
      attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n_attrs].value.clusterDim.x = (*launch.cluster)[0];
      attrs[n_attrs].value.clusterDim.y = (*launch.cluster)[1];
      attrs[n_attrs].value.clusterDim.z = (*launch.cluster)[2];
      ++n_attrs;
    }
    if (launch.pdl) {
      attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n_attrs].value.programmaticStreamSerializationAllowed = 1;
      ++n_attrs;
    }
    CUlaunchConfig cfg{};
    cfg.gridDimX = static_cast<unsigned>(grid[0]);
    cfg.gridDimY = static_cast<unsigned>(grid[1]);
    cfg.gridDimZ = static_cast<unsigned>(grid[2]);
    cfg.blockDimX = launch.block[0];
    cfg.blockDimY = launch.block[1];
    cfg.blockDimZ = launch.block[2];
    cfg.sharedMemBytes = static_cast<unsigned>(smem);
    cfg.hStream = s;
    cfg.attrs = n_attrs ? attrs : nullptr;
    cfg.numAttrs = n_attrs;
    CUresult rc = api->cuLaunchKernelEx(&cfg, functions[launch.function], la.params.data(), nullptr);
    if (rc != CUDA_SUCCESS) {
      Error e = rt::driver_error(*api, rc, "cuLaunchKernelEx", launch.path);
      e.message += " in call " + launch.call;
      return e;
    }
  }
  return std::nullopt;
}

std::optional<Error> Runtime::Impl::enqueue_graph(uint32_t index, CUstream s) {
  auto exec = static_cast<CUgraphExec>(graphs->find(index, dense.data(), dense.size()));
  if (exec == nullptr) {
    if (auto e = check(api->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                       "cuStreamBeginCapture")) {
      return e;
    }
    auto failed = enqueue(index, stream);
    CUgraph graph = nullptr;
    auto ended = check(api->cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    if (failed || ended) {
      if (graph) api->cuGraphDestroy(graph);
      return failed ? failed : ended;
    }
    CUresult rc = api->cuGraphInstantiateWithFlags(&exec, graph, 0);
    api->cuGraphDestroy(graph);
    if (auto e = check(rc, "cuGraphInstantiateWithFlags")) return e;
    graphs->insert(index, dense.data(), dense.size(), exec);
  }
  return check(api->cuGraphLaunch(exec, s), "cuGraphLaunch");
}

std::optional<Error> Runtime::enqueue(const std::string& program,
                                      const std::map<std::string, uint64_t>& vars, bool graph,
                                      Stream stream) {
  Impl& im = *impl_;
  if (auto e = im.bind()) return e;
  uint32_t index = 0;
  if (auto e = im.prepare(program, vars, &index)) return e;
  CUstream s = stream ? static_cast<CUstream>(stream) : im.stream;
  auto e = im.on_stream(s, graph, [&](CUstream on) {
    return graph ? im.enqueue_graph(index, on) : im.enqueue(index, on);
  });
  if (e && e->message.find("in program") == std::string::npos) {
    e->message += " in program `" + program + "`";
  }
  return e;
}

std::optional<Error> Runtime::enqueue_bound(const std::string& program,
                                            const std::map<std::string, uint64_t>& vars,
                                            const std::vector<Binding>& bindings,
                                            Stream stream) {
  Impl& im = *impl_;
  if (auto e = im.bind()) return e;
  uint32_t index = 0;
  if (auto e = im.prepare(program, vars, &index)) return e;
  const auto& names = im.lowered.bindable;
  const auto buffers_end = names.begin() + static_cast<std::ptrdiff_t>(im.lowered.buffer_count);
  for (const Binding& b : bindings) {
    // A buffer of that name first, else a state.
    auto it = std::lower_bound(names.begin(), buffers_end, b.buffer);
    bool is_buffer = it != buffers_end && *it == b.buffer;
    if (!is_buffer) it = std::lower_bound(buffers_end, names.end(), b.buffer);
    const std::string path = json_pointer_append(is_buffer ? "/buffers" : "/states", b.buffer);
    if (!is_buffer && (it == names.end() || *it != b.buffer)) {
      std::fill(im.bound.begin(), im.bound.end(), 0);
      return Error{ErrorKind::Caller, json_pointer_append("/buffers", b.buffer),
                   "unknown buffer or state `" + b.buffer + "` to bind"};
    }
    const size_t i = static_cast<size_t>(it - names.begin());
    auto fail = [&](const std::string& why) {
      std::fill(im.bound.begin(), im.bound.end(), 0);
      return Error{ErrorKind::Caller, path, std::string("cannot bind ") + (is_buffer ? "buffer" : "state") +
                                                " `" + b.buffer + "`: " + why};
    };
    const uint64_t need = is_buffer ? im.plan.buffers.at(b.buffer) : im.plan.states.at(b.buffer);
    if (im.bound[i]) return fail("it is bound twice");
    if (b.address == 0 || b.address % 16) {
      return fail("address " + std::to_string(b.address) + " is not a 16-byte aligned device address");
    }
    if (b.bytes < need) {
      return fail("it takes " + std::to_string(need) + " bytes, the memory given has " +
                  std::to_string(b.bytes));
    }
    CUdeviceptr base = 0;
    size_t size = 0;
    if (im.api->cuMemGetAddressRange(&base, &size, b.address) != CUDA_SUCCESS ||
        b.address + need > base + size) {
      return fail("the " + std::to_string(need) + " bytes at " + std::to_string(b.address) +
                  " are not inside one device allocation of this context");
    }
    im.bound[i] = b.address;
  }
  CUstream s = stream ? static_cast<CUstream>(stream) : im.stream;
  auto e = im.on_stream(s, false, [&](CUstream on) { return im.enqueue(index, on, true); });
  std::fill(im.bound.begin(), im.bound.end(), 0);
  if (e && e->message.find("in program") == std::string::npos) {
    e->message += " in program `" + program + "`";
  }
  return e;
}

std::optional<Error> Runtime::synchronize() {
  Impl& im = *impl_;
  if (auto e = im.bind()) return e;
  return im.sync("synchronize");
}

std::optional<Error> Runtime::run(const std::string& program,
                                  const std::map<std::string, uint64_t>& vars, bool graph) {
  Impl& im = *impl_;
  if (auto e = im.bind()) return e;
  uint32_t index = 0;
  if (auto e = im.prepare(program, vars, &index)) return e;
  if (auto e = im.join_foreign()) return e;
  im.compute_dirty = true;
  im.handed_to = nullptr;
  if (auto e = graph ? im.enqueue_graph(index, im.stream) : im.enqueue(index, im.stream)) {
    im.api->cuStreamSynchronize(im.stream);
    return e;
  }
  if (auto e = im.sync("run")) {
    e->message += " in program `" + program + "`";
    return e;
  }
  return std::nullopt;
}

Result<TimingStats> Runtime::time(const std::string& program,
                                  const std::map<std::string, uint64_t>& vars, bool graph,
                                  int iters) {
  using R = Result<TimingStats>;
  if (iters < 1) {
    return R::fail(Error{ErrorKind::Caller, "", "iters must be at least 1, got " +
                                                    std::to_string(iters)});
  }
  if (auto e = run(program, vars, graph)) return R::fail(*e);  // warm-up (and capture)
  Impl& im = *impl_;
  uint32_t index = 0;
  if (auto e = im.prepare(program, vars, &index)) return R::fail(*e);
  const auto& d = *im.api;
  std::vector<CUevent> events(2 * static_cast<size_t>(iters), nullptr);
  auto destroy = [&] {
    for (CUevent ev : events) {
      if (ev) d.cuEventDestroy(ev);
    }
  };
  for (auto& ev : events) {
    if (auto e = im.check(d.cuEventCreate(&ev, CU_EVENT_DEFAULT), "cuEventCreate")) {
      destroy();
      return R::fail(*e);
    }
  }
  std::optional<Error> err;
  for (int i = 0; i < iters && !err; ++i) {
    err = im.check(d.cuEventRecord(events[2 * i], im.stream), "cuEventRecord");
    if (!err) err = graph ? im.enqueue_graph(index, im.stream) : im.enqueue(index, im.stream);
    if (!err) err = im.check(d.cuEventRecord(events[2 * i + 1], im.stream), "cuEventRecord");
  }
  if (auto e = im.sync("timing")) err = err ? err : e;
  std::vector<double> us;
  for (int i = 0; i < iters && !err; ++i) {
    float ms = 0.f;
    err = im.check(d.cuEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cuEventElapsedTime");
    us.push_back(static_cast<double>(ms) * 1000.0);
  }
  destroy();
  if (err) return R::fail(*err);
  TimingStats t;
  t.iters = iters;
  std::sort(us.begin(), us.end());
  t.min_us = us.front();
  t.median_us = us.size() % 2 ? us[us.size() / 2] : 0.5 * (us[us.size() / 2 - 1] + us[us.size() / 2]);
  double sum = 0;
  for (double v : us) sum += v;
  t.mean_us = sum / static_cast<double>(us.size());
  return R::ok(t);
}

}  // namespace kernrt
