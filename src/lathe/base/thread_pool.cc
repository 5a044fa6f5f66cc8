#include "lathe/base/thread_pool.h"

#include <thread>

namespace lathe {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  n_threads_ = n_threads > 0 ? n_threads : 1;
}

}  // namespace lathe
