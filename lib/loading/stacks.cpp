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

const KernelSymbols *StackSymbolizer::kernel_symbols() {
    if (given_symbols_ != nullptr)
        return given_symbols_;
    if (!kernel_symbols_tried_) {
        kernel_symbols_tried_ = true;
        try {
            kernel_symbols_ = KernelSymbols::for_stacks();
        } catch (const RuntimeError &) {
            // Addresses it is.
        }
    }
    return kernel_symbols_ ? &*kernel_symbols_ : nullptr;
}

std::vector<DescribedFrame> StackSymbolizer::kernel_frames(int32_t id) {
    const auto ips = addresses(id);
    if (ips.empty())
        return {};
    // From the tracepoint's caller on, without the machinery that ran the BPF program.
    return kernel_stack(ips, kernel_symbols());
}

namespace {

// The frames' descriptions of stack `id`, or why it has none.
std::vector<std::string> texts_of(std::vector<DescribedFrame> frames, int32_t id) {
    if (frames.empty())
        return {lost_stack_text("", id)};
    std::vector<std::string> texts;
    for (auto &f : frames)
        texts.push_back(std::move(f.text));
    return texts;
}

} // namespace

std::vector<std::string> StackSymbolizer::kernel(int32_t id) {
    return texts_of(kernel_frames(id), id);
}

ProcessSymbols &StackSymbolizer::process(uint32_t pid) {
    return processes_.try_emplace(pid, static_cast<pid_t>(pid)).first->second;
}

std::vector<DescribedFrame> StackSymbolizer::user_frames(int32_t id, uint32_t pid) {
    if (id == MEMLAT_STACK_NO_USER)
        return {};
    std::vector<DescribedFrame> frames;
    for (uint64_t ip : addresses(id))
        frames.push_back({ip, process(pid).describe(ip)});
    return frames;
}

std::vector<std::string> StackSymbolizer::user(int32_t id, uint32_t pid) {
    if (id == MEMLAT_STACK_NO_USER)
        return {"[no user stack]"};
    return texts_of(user_frames(id, pid), id);
}

std::string lost_stack_text(std::string_view kind, int32_t id) {
    if (id == -1)
        return fmt::format("[{}stack not taken]", kind);
    if (id == MEMLAT_STACK_NO_ROOM || id == MEMLAT_STACK_MAP_FULL)
        return fmt::format("[{}stack lost: no room in the stack map]", kind);
    return fmt::format("[{}stack lost]", kind);
}

void note_stacks_lost(const char *tool, uint64_t lost, uint32_t map_entries) {
    if (lost != 0)
        fmt::print(stderr,
                   "{}: {} stacks lost: no room for them in the stack map of {} entries (a "
                   "stack's slot held another one); --max-entries makes it larger\n",
                   tool, lost, map_entries);
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
