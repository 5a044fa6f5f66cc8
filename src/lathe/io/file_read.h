// Opening files for reading. Every file lathe reads (safetensors, config.json, the index, tokenizer
// files, ...) is opened here: anything but a regular file (a FIFO, folder, socket or device) is refused
// with an IoError naming the path, without opening it (opening a device has side effects; a FIFO with no
// writer would block a plain open).
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

namespace lathe {

// An open, regular file: fd (the caller closes it) and its size in bytes.
struct RegularFile {
  int fd = -1;
  size_t size = 0;
};
// stat first, so that anything but a regular file (a FIFO, folder, socket or device, also behind a
// symlink) is refused without being opened: IoError "<path>: is a FIFO (named pipe), not a regular file"
// (or a directory, socket, device), or "<path>: cannot open: <errno text>". Then opens with O_NONBLOCK
// and checks the opened file again with fstat (the path may have been swapped in between).
RegularFile open_regular_file(const std::string& path);

// "<path>: is a FIFO (named pipe), not a regular file" (or a directory, socket, device) for a stat mode: the
// message open_regular_file throws, for other openers (the run folder's lock, metrics appends).
std::string not_regular_file_message(const std::string& path, mode_t mode);

// The whole file as bytes (open_regular_file, then read).
std::string read_file(const std::string& path);

// JSON text that must hold an object: FormatError "<where>: not valid JSON: ..." or "<where>: must be a
// JSON object, got <type>" (`where` names the file). The ordered form keeps the text's key order.
nlohmann::json parse_json_object(const std::string& text, const std::string& where);
nlohmann::ordered_json parse_ordered_json_object(const std::string& text, const std::string& where);

// A JSON file that must hold an object (read_file, then parse_json_object): FormatError "<path>: not valid JSON: ..." or "<path>: must be a
// JSON object, got <type>". The ordered form keeps the file's key order (chat templates iterate it).
nlohmann::json read_json_object_file(const std::string& path);
nlohmann::ordered_json read_ordered_json_object_file(const std::string& path);

// A JSON value for an error message, cut to 40 characters (a damaged file can hold anything).
std::string json_for_message(const nlohmann::json& v);

}  // namespace lathe
