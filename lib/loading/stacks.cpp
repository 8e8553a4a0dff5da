#include "loading/stacks.h"

#include <linux/capability.h>

#include <cstdio>
#include <fmt/format.h>

#include "base/capabilities.h"
#include "base/errors.h"
#include "memlat/stack.h"

namespace memlat {

std::vector<uint64_t> StackSymbolizer::addresses(int32_t id) {
    std::vector<uint64_t> ips(MEMLAT_STACK_DEPTH, 0);
    if (id < 0 || bpf_map__lookup_elem(stacks_, &id, sizeof(id), ips.data(),
                                       ips.size() * sizeof(uint64_t), 0) != 0)
        return {};
    while (!ips.empty() && ips.back() == 0)
        ips.pop_back();
    return ips;
}

std::vector<std::string> StackSymbolizer::kernel(int32_t id) {
    if (given_symbols_ == nullptr && !kernel_symbols_tried_) {
        kernel_symbols_tried_ = true;
        try {
            kernel_symbols_ = KernelSymbols::for_stacks();
        } catch (const RuntimeError &) {
            // Addresses it is.
        }
    }
    const auto ips = addresses(id);
    if (ips.empty())
        return {"[stack lost]"};
    // From the tracepoint's caller on, without the machinery that ran the BPF program.
    return kernel_stack_frames(ips, given_symbols_ != nullptr ? given_symbols_
                                    : kernel_symbols_         ? &*kernel_symbols_
                                                              : nullptr);
}

std::vector<std::string> StackSymbolizer::user(int32_t id, uint32_t pid) {
    if (id == MEMLAT_STACK_NO_USER)
        return {"[no user stack]"};
    const auto ips = addresses(id);
    if (ips.empty())
        return {"[stack lost]"};
    auto &symbols = processes_.try_emplace(pid, static_cast<pid_t>(pid)).first->second;
    std::vector<std::string> frames;
    for (uint64_t ip : ips)
        frames.push_back(symbols.describe(ip));
    return frames;
}

void note_user_frames_need_ptrace(const char *tool, const char *option) {
    if (!process_has_capability(CAP_SYS_PTRACE))
        fmt::print(stderr,
                   "{}: missing CAP_SYS_PTRACE: {} reads the libraries of other users' "
                   "processes (/proc/PID/root) only with it; their user frames print as "
                   "[library]+offset\n",
                   tool, option);
}

} // namespace memlat
