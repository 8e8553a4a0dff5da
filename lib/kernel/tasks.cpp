#include "kernel/tasks.h"

#include <cerrno>
#include <csignal>
#include <fmt/format.h>
#include <optional>
#include <string>

#include "base/errors.h"
#include "base/files.h"

namespace memlat {

namespace {

// The thread group (process) of task `id` from /proc/ID/status, or nullopt when no such task
// exists. /proc/ID exists for every thread id, though only processes are listed in /proc.
std::optional<long> thread_group_of(int id) {
    if (id <= 0)
        return std::nullopt;
    auto status = read_text_file(fmt::format("/proc/{}/status", id));
    if (!status)
        return std::nullopt;
    std::string_view rest = *status, line;
    while (next_line(rest, line))
        if (line.starts_with("Tgid:"))
            return std::strtol(std::string(line.substr(5)).c_str(), nullptr, 10);
    return std::nullopt;
}

} // namespace

void require_process(int pid, std::string_view option) {
    auto group = thread_group_of(pid);
    if (!group)
        throw UsageError(fmt::format("{}: no process with id {}", option, pid));
    if (*group != pid)
        throw UsageError(fmt::format("{} {} is a thread of process {}, not a process; give {} {}",
                                     option, pid, *group, option, *group));
}

void require_thread(int tid, std::string_view option, std::optional<int> pid) {
    const auto group = thread_group_of(tid);
    if (!group)
        throw UsageError(fmt::format("{}: no thread with id {}", option, tid));
    if (pid && *group != *pid)
        throw UsageError(fmt::format("{} {} is a thread of process {}, not of -p {}: nothing "
                                     "would match both",
                                     option, tid, *group, *pid));
}

bool task_exited(uint32_t id) {
    return kill(static_cast<pid_t>(id), 0) != 0 && errno == ESRCH;
}

} // namespace memlat
