#include "loading/flush_path.h"

#include <cstring>

#include "loading/kernel_functions.h"

namespace memlat {

std::vector<uint64_t> rel32_targets(std::span<const uint8_t> code, uint64_t address) {
    constexpr uint8_t call_rel32 = 0xe8, jmp_rel32 = 0xe9;
    constexpr size_t length = 5; // the opcode and its displacement
    std::vector<uint64_t> targets;
    for (size_t at = 0; at + length <= code.size(); ++at) {
        if (code[at] != call_rel32 && code[at] != jmp_rel32)
            continue;
        int32_t displacement = 0;
        std::memcpy(&displacement, &code[at + 1], sizeof(displacement));
        targets.push_back(address + at + length + static_cast<int64_t>(displacement));
    }
    return targets;
}

std::optional<std::string> installed_remote_flush() {
#if defined(__x86_64__)
    constexpr std::string_view suffix = "_flush_tlb_multi";
    const auto found = find_kernel_functions({"flush_tlb_multi"});
    if (!found || found->empty() || found->front().address == 0)
        return std::nullopt;
    const KernelFunction &caller = found->front();
    const std::vector<uint64_t> targets = rel32_targets(caller.code, caller.address);
    if (targets.empty())
        return std::nullopt;
    const auto describer = KernelDescriber::load();
    if (describer == nullptr)
        return std::nullopt;
    const auto names = describer->describe(targets);
    if (!names)
        return std::nullopt;
    // "pvm_flush_tlb_multi+0x0": the start of a function that flushes remote TLBs.
    for (const std::string &described : *names) {
        const size_t plus = described.find("+0x0");
        if (plus == std::string::npos || plus + 4 != described.size())
            continue;
        const std::string name = described.substr(0, plus);
        if (name.size() > suffix.size() && name.ends_with(suffix))
            return name;
    }
#endif
    return std::nullopt;
}

const Hypervisor &this_hypervisor() {
    static const Hypervisor h = [] {
        const Hypervisor &at_boot = hypervisor_at_boot();
        if (const auto function = installed_remote_flush())
            if (auto installed = hypervisor_from_flush_function(*function, at_boot))
                return *installed;
        return at_boot;
    }();
    return h;
}

} // namespace memlat
