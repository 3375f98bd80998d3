// Graph cache bookkeeping: exact (program, dense vars) keys, LRU eviction through the
// release callback, replacement of an existing key, and release of everything on clear.
#include <gtest/gtest.h>

#include <vector>

#include "graph_cache.hpp"

namespace kernrt {
namespace {

void* handle(uintptr_t v) { return reinterpret_cast<void*>(v); }

TEST(GraphCache, ExactKeyLookup) {
  std::vector<void*> released;
  rt::GraphCache cache(4, [&](void* h) { released.push_back(h); });
  const uint64_t a[2] = {1, 2}, b[2] = {2, 1};
  cache.insert(0, a, 2, handle(10));
  EXPECT_EQ(cache.find(0, a, 2), handle(10));
  EXPECT_EQ(cache.find(0, b, 2), nullptr);
  EXPECT_EQ(cache.find(1, a, 2), nullptr);  // same vars, other program
  EXPECT_EQ(cache.find(0, a, 1), nullptr);  // prefix is not the key
  EXPECT_TRUE(released.empty());
}

TEST(GraphCache, EvictsLeastRecentlyUsed) {
  std::vector<void*> released;
  rt::GraphCache cache(2, [&](void* h) { released.push_back(h); });
  const uint64_t k1[1] = {1}, k2[1] = {2}, k3[1] = {3};
  cache.insert(0, k1, 1, handle(1));
  cache.insert(0, k2, 1, handle(2));
  ASSERT_EQ(cache.find(0, k1, 1), handle(1));  // k1 is now the most recent
  cache.insert(0, k3, 1, handle(3));           // evicts k2
  EXPECT_EQ(released, std::vector<void*>{handle(2)});
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(0, k2, 1), nullptr);
  EXPECT_EQ(cache.find(0, k1, 1), handle(1));
  EXPECT_EQ(cache.find(0, k3, 1), handle(3));
}

TEST(GraphCache, ReplacingAKeyReleasesTheOldHandle) {
  std::vector<void*> released;
  rt::GraphCache cache(3, [&](void* h) { released.push_back(h); });
  const uint64_t k[1] = {5};
  cache.insert(2, k, 1, handle(7));
  cache.insert(2, k, 1, handle(8));
  EXPECT_EQ(released, std::vector<void*>{handle(7)});
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.find(2, k, 1), handle(8));
}

TEST(GraphCache, ClearAndDestructorReleaseEverything) {
  std::vector<void*> released;
  {
    rt::GraphCache cache(8, [&](void* h) { released.push_back(h); });
    for (uint64_t i = 1; i <= 3; ++i) cache.insert(0, &i, 1, handle(i));
    cache.clear();
    EXPECT_EQ(released.size(), 3u);
    EXPECT_EQ(cache.size(), 0u);
    const uint64_t k[1] = {9};
    cache.insert(0, k, 1, handle(9));
  }
  EXPECT_EQ(released.size(), 4u);
  EXPECT_EQ(released.back(), handle(9));
}

TEST(GraphCache, CapacityIsAtLeastOne) {
  rt::GraphCache cache(0, nullptr);
  EXPECT_EQ(cache.capacity(), 1u);
}

}  // namespace
}  // namespace kernrt
