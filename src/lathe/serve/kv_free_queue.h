// A KV cache block's bookkeeping (id, ref count, prefix-cache hash) and the free queue of blocks no
// request holds: an intrusive doubly linked list, so a prefix hit can take a block out of its middle in
// O(1) (a deque cannot). Its head is the least recently freed block, the next one to be reused.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace lathe {

// A prefix-cache key of one full block (kv_block_hash.h says what it covers).
using KvBlockHash = uint64_t;

struct KvBlock {
  int32_t id = 0;       // index into the KV store's blocks
  int32_t ref_cnt = 0;  // requests holding the block; 0: it is in the free queue (or is the null block)
  // Set only when the block is full and committed to the prefix cache; cleared when it is reallocated.
  std::optional<KvBlockHash> hash;
  // Free-queue links, null while the block is not in the queue. Only FreeKvBlockQueue touches them.
  KvBlock* prev = nullptr;
  KvBlock* next = nullptr;
};

class FreeKvBlockQueue {
 public:
  // The blocks in order (blocks[0] at the head); they must outlive the queue and not move.
  explicit FreeKvBlockQueue(std::span<KvBlock> blocks);
  FreeKvBlockQueue(const FreeKvBlockQueue&) = delete;  // the blocks point at this queue's sentinels
  FreeKvBlockQueue& operator=(const FreeKvBlockQueue&) = delete;

  int64_t size() const { return size_; }
  bool contains(const KvBlock& b) const { return b.next != nullptr; }

  // Unlinks and returns the head (the least recently freed block). The queue must not be empty.
  KvBlock& pop_front();
  // Unlinks b from anywhere in the queue, O(1). b must be in the queue.
  void remove(KvBlock& b);
  // Appends b at the tail (most recently freed). b must not be in the queue.
  void push_back(KvBlock& b);

  // The block ids from head to tail, O(size): for tests and logs.
  std::vector<int32_t> ids() const;

 private:
  KvBlock head_, tail_;  // sentinels: every queued block has a non-null prev and next
  int64_t size_ = 0;
};

}  // namespace lathe
