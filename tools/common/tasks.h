// Checks of the process and thread ids users give (-p, -t), shared by every tool.
#pragma once

#include <string_view>

namespace memlat {

// `pid` names a live process (a thread-group leader). A thread id of another process is a
// UsageError that names the process it belongs to, since filtering on it would match nothing.
void require_process(int pid, std::string_view option);

// `tid` names a live thread (of any process).
void require_thread(int tid, std::string_view option);

} // namespace memlat
