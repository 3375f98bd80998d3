// Graph cache bookkeeping (see graph_cache.hpp).
#include "graph_cache.hpp"

#include <algorithm>

namespace kernrt::rt {

GraphCache::GraphCache(size_t capacity, Release release)
    : entries_(std::max<size_t>(capacity, 1)), release_(std::move(release)) {}

GraphCache::~GraphCache() { clear(); }

GraphCache::Entry* GraphCache::lookup(uint32_t program, const uint64_t* dense, size_t n) {
  for (Entry& e : entries_) {
    if (e.used && e.program == program && e.dense.size() == n &&
        std::equal(e.dense.begin(), e.dense.end(), dense)) {
      return &e;
    }
  }
  return nullptr;
}

GraphCache::Handle GraphCache::find(uint32_t program, const uint64_t* dense, size_t n) {
  Entry* e = lookup(program, dense, n);
  if (e == nullptr) return nullptr;
  e->tick = ++tick_;
  return e->handle;
}

void GraphCache::insert(uint32_t program, const uint64_t* dense, size_t n, Handle handle) {
  Entry* slot = lookup(program, dense, n);
  if (slot == nullptr) {
    for (Entry& e : entries_) {
      if (!e.used) { slot = &e; break; }
    }
  }
  if (slot == nullptr) {
    slot = &*std::min_element(entries_.begin(), entries_.end(),
                              [](const Entry& a, const Entry& b) { return a.tick < b.tick; });
  }
  if (slot->used) {
    if (release_ && slot->handle) release_(slot->handle);
    --size_;
  }
  slot->used = true;
  slot->program = program;
  slot->dense.assign(dense, dense + n);
  slot->tick = ++tick_;
  slot->handle = handle;
  ++size_;
}

void GraphCache::clear() {
  for (Entry& e : entries_) {
    if (e.used && release_ && e.handle) release_(e.handle);
    e = Entry{};
  }
  size_ = 0;
}

}  // namespace kernrt::rt
