#include "lathe/models/kv_cache_dtype.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/tensor/quant_weight.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

std::string fixture_dir(const std::string& name) {
  return (fs::path(testing::fixtures_root()) / "models" / name).string();
}

// The fixture's checkpoint with every tensor stored in bf16, in a scratch folder.
std::string bf16_copy(const std::string& name) {
  const std::string src = fixture_dir(name), out = testing::scratch_dir("kv_dtype_bf16_" + name);
  SafetensorsFile f = SafetensorsFile::open(src + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& e : f.entries()) tensors.push_back({e.name, f.tensor(e.name).to(DType::kBF16)});
  save_safetensors(out + "/model.safetensors", tensors);
  fs::copy_file(src + "/config.json", out + "/config.json");
  return out;
}

TEST(KvCacheDtype, ParsesItsFourNamesOnly) {
  for (const KvCacheDtype d : {KvCacheDtype::kAuto, KvCacheDtype::kF32, KvCacheDtype::kBF16, KvCacheDtype::kInt8})
    EXPECT_EQ(parse_kv_cache_dtype(kv_cache_dtype_name(d)), d);
  EXPECT_EQ(parse_kv_cache_dtype("bf16"), KvCacheDtype::kBF16);
  EXPECT_EQ(parse_kv_cache_dtype("int8"), KvCacheDtype::kInt8);
  for (const char* bad : {"", "fp8", "BF16", "float32", "f16", "i8", "INT8"})
    EXPECT_THROW(parse_kv_cache_dtype(bad), InvalidArgument) << bad;
}

// auto follows the weights: bf16 matrices kept in memory -> bf16; f32 weights, or bf16 ones widened at load
// (force_f32, or a MoE model, whose weights are always widened) -> f32. f32, bf16 and int8 are taken as asked.
TEST(KvCacheDtype, AutoIsBf16ExactlyWhenTheMatricesAreBf16) {
  const auto f32 = Model::load(fixture_dir("llama"));
  const std::string dir = bf16_copy("llama");
  const auto bf16 = Model::load(dir), widened = Model::load(dir, {.force_f32 = true});
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kAuto, *f32), DType::kF32);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kAuto, *bf16), DType::kBF16);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kAuto, *widened), DType::kF32);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kAuto, *Model::load(bf16_copy("qwen3_moe"))), DType::kF32);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kF32, *bf16), DType::kF32);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kBF16, *f32), DType::kBF16);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kInt8, *f32), DType::kI8);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kInt8, *bf16), DType::kI8);
  EXPECT_EQ(kv_store_dtype_name(DType::kI8), "int8");
  EXPECT_EQ(kv_store_dtype_name(DType::kBF16), "bf16");
}

// A quantised model (its Linears quantised as they are read, as a `lathe quantize` folder or a Q8_0 / Q4_0
// GGUF holds them) caches in bf16, whatever its other tensors hold; asked-for dtypes stay as asked.
TEST(KvCacheDtype, AutoIsBf16ForQuantisedLinears) {
  for (const char* format : {"int8", "int4", "nf4"}) {
    const auto q = Model::load(fixture_dir("llama"), {.quantize_linears = parse_quant_spec(format)});
    EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kAuto, *q), DType::kBF16) << format;
    EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kF32, *q), DType::kF32) << format;
    EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::kInt8, *q), DType::kI8) << format;
  }
}

}  // namespace
}  // namespace lathe
