// The graph cache: one instantiated CUDA graph per (program, dense vars), bounded LRU.
//
// Owns only the bookkeeping (pure, CPU-testable): storage is reserved for `capacity`
// entries up front, lookups are a linear scan over at most `capacity` keys that compares
// the dense var vector in place, so a hit (the replay path) never allocates. Inserting
// beyond capacity evicts the least recently used entry through the release callback
// (which destroys the graph exec). Does not capture or launch anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace kernrt::rt {

class GraphCache {
 public:
  using Handle = void*;  // a CUgraphExec
  using Release = std::function<void(Handle)>;

  GraphCache(size_t capacity, Release release);
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // The cached handle for this key, marked most recently used; nullptr if absent.
  Handle find(uint32_t program, const uint64_t* dense, size_t n);
  // Adds (or replaces) the key's handle, evicting the LRU entry when full.
  void insert(uint32_t program, const uint64_t* dense, size_t n, Handle handle);
  void clear();
  size_t size() const { return size_; }
  size_t capacity() const { return entries_.size(); }

 private:
  struct Entry {
    bool used = false;
    uint32_t program = 0;
    std::vector<uint64_t> dense;
    uint64_t tick = 0;
    Handle handle = nullptr;
  };
  Entry* lookup(uint32_t program, const uint64_t* dense, size_t n);
  std::vector<Entry> entries_;
  Release release_;
  uint64_t tick_ = 0;
  size_t size_ = 0;
};

}  // namespace kernrt::rt
