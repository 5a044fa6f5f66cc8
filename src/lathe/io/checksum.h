// File checksums for checkpoints: XXH3-128 (xxHash), fast enough (~10 GB/s) to check every file of a
// checkpoint on each resume; it detects truncation, torn writes and flipped bits, not tampering.
#pragma once

#include <cstdint>
#include <string>

namespace lathe {

struct FileDigest {
  uint64_t size = 0;
  std::string xxh3_128;  // 32 lowercase hex digits (the canonical big-endian form, as `xxhsum -H2` prints)
  bool operator==(const FileDigest&) const = default;
};

// Reads `path` in chunks (opened by open_regular_file). Throws IoError naming the path (missing, not a
// regular file: which kind, read error).
FileDigest digest_file(const std::string& path);
// Of bytes in memory (the same value digest_file gives for a file holding them).
FileDigest digest_bytes(const void* data, size_t size);

}  // namespace lathe
