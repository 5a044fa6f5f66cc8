// Packing SFT examples into rows (specs/posttrain.md §2): best-fit-decreasing (TRL packing_strategy="bfd")
// puts whole examples into rows of at most `capacity` tokens; each keeps its own positions (from 0) and
// attends only within itself (ForwardBatch::packed), so a packed row trains exactly as its examples run
// one by one. Padding-free: a row is as long as what it holds.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lathe::posttrain {

// Best-fit decreasing: examples by length, longest first (ties in index order); each goes into the open
// row with the least room that still fits it (ties: the row opened first), else a new row. Returns the
// rows, each the indices of its examples in placement order. InvalidArgument for a length outside
// [1, capacity] (truncation runs first).
std::vector<std::vector<int64_t>> pack_bfd(std::span<const int64_t> lengths, int64_t capacity);

}  // namespace lathe::posttrain
