// A GGUF file's tokenizer (tokenizer.ggml.* metadata) as the Hugging Face tokenizer.json and
// tokenizer_config.json it stands for, so the one tokenizer implementation reads both (docs/gguf.md).
// "llama" (SentencePiece BPE: tokens, scores, token types) becomes a byte-fallback BPE whose merges are
// derived from the scores as transformers' LlamaConverter derives them; "gpt2" (byte-level BPE: tokens
// and merges) takes its pre-tokenizer regex from tokenizer.ggml.pre.
#pragma once

#include "lathe/io/gguf.h"
#include "lathe/io/tokenizer/tokenizer.h"

namespace lathe::tokenizer {

// True when the file carries a tokenizer (tokenizer.ggml.model and tokenizer.ggml.tokens).
bool gguf_has_tokenizer(const GgufFile& g);

// tokenizer.json and tokenizer_config.json texts (bos / eos / unk / pad tokens, add_bos_token,
// add_eos_token, chat_template), named after the file. FormatError naming the file and key for missing or
// inconsistent metadata; NotImplemented for another tokenizer.ggml.model or an unknown tokenizer.ggml.pre.
TokenizerFiles gguf_tokenizer_files(const GgufFile& g);

}  // namespace lathe::tokenizer
