#include "kernel/process_titles.h"

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
    if (e.read_at == std::chrono::steady_clock::time_point{} || now - e.read_at >= refresh_) {
        e.title = read_process_title(pid);
        e.read_at = now;
        ++reads_;
    }
    return e.title;
}

} // namespace memlat
