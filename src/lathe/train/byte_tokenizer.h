// A byte-level tokenizer folder that needs no training and no download: the 256 GPT-2 byte tokens (ids
// 0-255, no merges) plus <|endoftext|> (256, BOS and pad), <|im_start|> (257) and <|im_end|> (258, EOS),
// with a ChatML chat template. The quickstart corpus (`lathe data synth`) and the post-training recipes
// on the same world use it.
#pragma once

#include <string>

namespace lathe::train {

// Writes dir/tokenizer.json and dir/tokenizer_config.json (dir is created).
void write_byte_level_tokenizer(const std::string& dir);

}  // namespace lathe::train
