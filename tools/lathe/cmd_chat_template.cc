// lathe chat-template TOKENIZER: renders a conversation with the model's own chat template (the Jinja in
// tokenizer_config.json), exactly as transformers' apply_chat_template(tokenize=False) would.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "args.h"
#include "lathe/io/file_read.h"
#include "lathe/io/jinja/chat_template.h"

namespace lathe::cli {
namespace fs = std::filesystem;
using nlohmann::ordered_json;

const CommandSpec& chat_template_spec() {
  static const CommandSpec spec{
      .name = "chat-template",
      .usage = "TOKENIZER [options] < conversation.json",
      .brief = "render {\"messages\", \"tools\", ...} with the model's chat template",
      .summary = "Renders {\"messages\": [...], \"tools\": [...], \"enable_thinking\": false, ...} from stdin\n"
                 "with the chat template of TOKENIZER's tokenizer_config.json (TOKENIZER: a model folder or a\n"
                 "tokenizer.json); every key other than messages is passed to the template.\n",
      .options = {
          {"--add-generation-prompt", "", "end with the assistant turn's opening"},
      }};
  return spec;
}

int cmd_chat_template(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, chat_template_spec());
  if (a.help() || a.positional.size() != 1) {
    std::fputs(help_text(chat_template_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  fs::path p(a.positional[0]);
  const fs::path config_path = fs::is_directory(p) ? p / "tokenizer_config.json" : p.parent_path() / "tokenizer_config.json";
  LATHE_CHECK_ARG(fs::exists(fs::symlink_status(config_path)), config_path.string(),
                  ": not found (the chat template lives there)");
  ordered_json config = read_ordered_json_object_file(config_path.string()), input;
  config.erase("added_tokens_decoder");  // large and never read by templates
  try {
    input = ordered_json::parse(std::string(std::istreambuf_iterator<char>(std::cin), {}));
  } catch (const ordered_json::exception& e) {
    throw InvalidArgument(str_cat("stdin: not valid JSON: ", e.what()));
  }
  LATHE_CHECK_ARG(input.is_object() && input.contains("messages") && input["messages"].is_array(),
                  "stdin: expected {\"messages\": [...], ...}");
  jinja::ChatRequest req;
  req.messages = input["messages"];
  req.add_generation_prompt = a.has("--add-generation-prompt");
  for (auto it = input.begin(); it != input.end(); ++it)
    if (it.key() != "messages") req.extra[it.key()] = it.value();
  std::cout << jinja::apply_chat_template(config, req);
  return 0;
}

}  // namespace lathe::cli
