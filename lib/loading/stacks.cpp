#include "loading/stacks.h"

#include <fmt/format.h>

#include "base/errors.h"

namespace memlat {

namespace {

// bpf_get_stackid() keeps at most this many frames (PERF_MAX_STACK_DEPTH).
constexpr size_t max_frames = 127;
constexpr int32_t no_user_stack = -14; // -EFAULT: a kernel thread, or no user registers

bool tracing_machinery(const std::string &frame) {
    return frame.starts_with("bpf_") || frame.starts_with("__bpf_") || frame.starts_with("0x") ||
           frame.starts_with("__traceiter_") || frame.starts_with("trace_") ||
           frame.find("stop_runtime") != std::string::npos;
}

} // namespace

std::vector<uint64_t> StackSymbolizer::addresses(int32_t id) {
    std::vector<uint64_t> ips(max_frames, 0);
    if (id < 0 || bpf_map__lookup_elem(stacks_, &id, sizeof(id), ips.data(),
                                       ips.size() * sizeof(uint64_t), 0) != 0)
        return {};
    while (!ips.empty() && ips.back() == 0)
        ips.pop_back();
    return ips;
}

std::vector<std::string> StackSymbolizer::kernel(int32_t id) {
    if (!kernel_symbols_tried_) {
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
    std::vector<std::string> frames;
    bool in_tracing = true;
    for (uint64_t ip : ips) {
        std::string frame =
            kernel_symbols_ ? kernel_symbols_->describe(ip) : fmt::format("0x{:x}", ip);
        if (in_tracing && tracing_machinery(frame))
            continue;
        in_tracing = false;
        frames.push_back(std::move(frame));
    }
    return frames;
}

std::vector<std::string> StackSymbolizer::user(int32_t id, uint32_t pid) {
    if (id == no_user_stack)
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

} // namespace memlat
