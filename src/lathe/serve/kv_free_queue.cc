// FreeKvBlockQueue: linking and unlinking between the head and tail sentinels.
#include "lathe/serve/kv_free_queue.h"

#include "lathe/base/error.h"

namespace lathe {

FreeKvBlockQueue::FreeKvBlockQueue(std::span<KvBlock> blocks) {
  head_.id = tail_.id = -1;
  head_.next = &tail_;
  tail_.prev = &head_;
  for (KvBlock& b : blocks) push_back(b);
}

KvBlock& FreeKvBlockQueue::pop_front() {
  LATHE_ASSERT(size_ > 0, "pop_front on an empty free queue");
  KvBlock& b = *head_.next;
  remove(b);
  return b;
}

void FreeKvBlockQueue::remove(KvBlock& b) {
  LATHE_ASSERT(contains(b), "block ", b.id, " is not in the free queue");
  b.prev->next = b.next;
  b.next->prev = b.prev;
  b.prev = b.next = nullptr;
  --size_;
}

void FreeKvBlockQueue::push_back(KvBlock& b) {
  LATHE_ASSERT(!contains(b), "block ", b.id, " is already in the free queue");
  b.prev = tail_.prev;
  b.next = &tail_;
  tail_.prev->next = &b;
  tail_.prev = &b;
  ++size_;
}

std::vector<int32_t> FreeKvBlockQueue::ids() const {
  std::vector<int32_t> out;
  for (const KvBlock* b = head_.next; b != &tail_; b = b->next) out.push_back(b->id);
  return out;
}

}  // namespace lathe
