// Reading small text files (/proc, /sys) without iostreams: std::ifstream would pull the
// iostream machinery into the static binaries and cost about 1 MB each.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memlat {

// The whole file, or nullopt with errno set.
std::optional<std::string> read_text_file(const std::string &path);

// Takes the next line (without its newline) off the front of `text`; false at the end.
bool next_line(std::string_view &text, std::string_view &line);

} // namespace memlat
