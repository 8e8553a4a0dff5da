// Processes and threads: checks of the ids users give (-p, -t), and whether a task the BPF
// side counted still exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace memlat {

// `pid` names a live process (a thread-group leader). A thread id of another process is a
// UsageError that names the process it belongs to, since filtering on it would match nothing.
void require_process(int pid, std::string_view option);

// `tid` names a live thread: of any process, or of process `pid` where -p gave one too (a
// thread of another process would match nothing, silently).
void require_thread(int tid, std::string_view option, std::optional<int> pid = std::nullopt);

// Whether the process or thread `id` has exited (kill(id, 0) says ESRCH).
bool task_exited(uint32_t id);

} // namespace memlat
