#include "loading/stack_profile.h"

#include "memlat/stack.h"

namespace memlat {

StackProfileBuilder::StackProfileBuilder(StackSymbolizer &symbolizer,
                                         std::vector<profile::ValueType> types, size_t default_type)
    : symbolizer_(symbolizer) {
    profile_.sample_types = std::move(types);
    profile_.default_sample_type = default_type;
}

size_t StackProfileBuilder::user_mapping(const ProcessSymbols::Mapping &m) {
    // One per file and place: processes map a library at addresses of their own.
    auto [it, inserted] =
        user_mappings_.try_emplace({m.path, m.start, m.end, m.offset}, profile_.mappings.size());
    if (inserted)
        profile_.mappings.push_back({m.start, m.end, m.offset, m.path, false});
    return it->second;
}

namespace {

profile::Frame text_frame(std::string text) {
    return profile::Frame{.address = 0, .function = std::move(text)};
}

} // namespace

void StackProfileBuilder::append_kernel(std::vector<profile::Frame> &frames, int32_t id) {
    const auto kernel = symbolizer_.kernel_frames(id);
    if (kernel.empty())
        frames.push_back(text_frame(lost_stack_text("kernel ", id)));
    if (!kernel.empty() && !kernel_mapping_) {
        kernel_mapping_ = profile_.mappings.size();
        profile_.mappings.push_back({0, 0, 0, "[kernel.kallsyms]", true});
    }
    for (const auto &f : kernel) {
        kernel_low_ = std::min(kernel_low_, f.address);
        kernel_high_ = std::max(kernel_high_, f.address);
        frames.push_back({f.address, described_function(f.text), kernel_mapping_, true});
    }
}

void StackProfileBuilder::add_chain(std::vector<std::string> roots, int32_t kernel_stack,
                                    std::string link, int32_t above, std::vector<int64_t> values,
                                    std::vector<profile::Label> labels) {
    profile::Sample sample;
    sample.values = std::move(values);
    sample.labels = std::move(labels);
    // Innermost first: the other thread's frames on top, the link, then the waiter's.
    if (above >= 0)
        append_kernel(sample.frames, above);
    sample.frames.push_back(text_frame(std::move(link)));
    append_kernel(sample.frames, kernel_stack);
    sample.roots = std::move(roots);
    profile_.samples.push_back(std::move(sample));
}

void StackProfileBuilder::add(std::vector<std::string> roots, int32_t kernel_stack,
                              int32_t user_stack, uint32_t pid, std::vector<int64_t> values,
                              std::vector<profile::Label> labels) {
    profile::Sample sample;
    sample.values = std::move(values);
    sample.labels = std::move(labels);
    // Innermost first: the kernel's frames, then the user's.
    append_kernel(sample.frames, kernel_stack);
    if (user_stack != MEMLAT_STACK_NO_USER) {
        const auto user = symbolizer_.user_frames(user_stack, pid);
        if (user.empty())
            sample.frames.push_back(text_frame(lost_stack_text("user ", user_stack)));
        for (const auto &f : user) {
            profile::Frame frame{f.address, described_function(f.text), std::nullopt, false};
            if (const auto *m = symbolizer_.process(pid).mapping_of(f.address)) {
                frame.mapping = user_mapping(*m);
                if (!frame.function.empty())
                    profile_.mappings[*frame.mapping].has_functions = true;
            }
            sample.frames.push_back(std::move(frame));
        }
    }
    sample.roots = std::move(roots);
    profile_.samples.push_back(std::move(sample));
}

profile::Profile StackProfileBuilder::take(int64_t time_nanos, int64_t duration_nanos) {
    if (kernel_mapping_) {
        auto &m = profile_.mappings[*kernel_mapping_];
        m.start = kernel_low_;
        m.limit = kernel_high_ + 1;
    }
    profile_.time_nanos = time_nanos;
    profile_.duration_nanos = duration_nanos;
    return std::move(profile_);
}

profile::Profile StackProfileBuilder::take(std::chrono::system_clock::time_point began) {
    const auto ns = [](auto d) {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
    };
    return take(ns(began.time_since_epoch()), ns(std::chrono::system_clock::now() - began));
}

} // namespace memlat
