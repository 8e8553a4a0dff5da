#include "kernel/process_titles.h"

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "base/files.h"

namespace memlat {

std::string read_process_title(uint32_t pid, size_t max_bytes) {
    // One byte more than shown: whether the title was cut.
    auto raw = read_file_prefix(fmt::format("/proc/{}/cmdline", pid), max_bytes + 1);
    if (!raw)
        return "";
    std::string title = std::move(*raw);
    while (!title.empty() && title.back() == '\0')
        title.pop_back();
    for (char &c : title)
        if (c == '\0')
            c = ' ';
        else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            c = '?';
    if (title.size() > max_bytes)
        title.resize(max_bytes);
    return title;
}

uint64_t process_start_time(uint32_t pid) {
    auto stat = read_file_prefix(fmt::format("/proc/{}/stat", pid), 1024);
    if (!stat)
        return 0;
    // The fields after the command's parenthesis (the command may hold spaces and
    // parentheses); starttime is the 22nd field, the 20th after it.
    const size_t paren = stat->rfind(')');
    if (paren == std::string::npos)
        return 0;
    std::string_view rest(*stat);
    rest.remove_prefix(paren + 1);
    for (int field = 3; field <= 22; ++field) {
        const size_t start = rest.find_first_not_of(' ');
        if (start == std::string_view::npos)
            return 0;
        rest.remove_prefix(start);
        const size_t end = rest.find(' ');
        if (field == 22)
            return std::strtoull(std::string(rest.substr(0, end)).c_str(), nullptr, 10);
        if (end == std::string_view::npos)
            return 0;
        rest.remove_prefix(end);
    }
    return 0;
}

const std::string &ProcessTitles::of(uint32_t pid) {
    const auto now = std::chrono::steady_clock::now();
    if (now - swept_ > forget_) {
        std::erase_if(cache_, [&](const auto &e) { return now - e.second.asked_at > forget_; });
        swept_ = now;
    }
    auto it = cache_.find(pid);
    if (it == cache_.end()) {
        if (cache_.size() >= max_entries)
            cache_.erase(cache_.begin());
        it = cache_.emplace(pid, Entry{}).first;
    }
    Entry &e = it->second;
    e.asked_at = now;
    const uint64_t started = process_start_time(pid);
    if (e.read_at == std::chrono::steady_clock::time_point{} || now - e.read_at >= refresh_ ||
        started != e.start_time) {
        e.title = read_process_title(pid);
        e.start_time = started;
        e.read_at = now;
        ++reads_;
    }
    return e.title;
}

} // namespace memlat
