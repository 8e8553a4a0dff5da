// Stall profiles: stacks with values, written as folded stacks (one line per stack, root frame
// first: flamegraph.pl, inferno, speedscope) or as pprof's profile.proto, gzip-compressed
// (go tool pprof, and the continuous profilers that scrape /debug/pprof). Neither format
// needs a library: the folded one is text, and pprof's is six small protobuf messages written
// by hand here (a protobuf library would cost more than memlat's whole size budget for them;
// zlib, which libelf links already, compresses).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memlat::profile {

// A sample value's kind: ("stalls", "count"), ("stall_time", "nanoseconds").
struct ValueType {
    std::string type, unit;
};

// An executable or library mapped where the user frames' addresses are, or the kernel.
struct Mapping {
    uint64_t start = 0, limit = 0, file_offset = 0;
    std::string file; // the path; "[kernel.kallsyms]" for the kernel
    bool has_functions = false;
};

// One frame: the address and the function it is in, when known.
struct Frame {
    uint64_t address = 0;
    std::string function;          // "" when not known (the address alone then)
    std::optional<size_t> mapping; // an index in Profile::mappings
    bool kernel = false;           // folded stacks mark kernel frames "_[k]", as perf's do
};

struct Label {
    std::string key;
    std::string text;              // a string label, or...
    std::optional<int64_t> number; // ...a numeric one (pid)
};

struct Sample {
    // The frames of the folded stack's root that are not code: a stall's cause and process,
    // outermost first. pprof has them as labels instead.
    std::vector<std::string> roots;
    std::vector<Frame> frames; // innermost first, as pprof has them
    std::vector<int64_t> values;
    std::vector<Label> labels;
};

struct Profile {
    std::vector<ValueType> sample_types;
    size_t default_sample_type = 0;
    std::vector<Sample> samples;
    std::vector<Mapping> mappings;
    int64_t time_nanos = 0;     // when the profile began (Unix time)
    int64_t duration_nanos = 0; // how long it was taken for
    std::vector<std::string> comments;
};

// The folded stacks of `value` (an index in sample_types): one line per distinct stack,
// "root;...;outermost;...;innermost VALUE", sorted, stacks with a zero value left out.
// A frame is its function's name (kernel frames with "_[k]"), else the address in hex;
// ';' and line breaks in a name become ':' and ' ' (they would split the frame or the line).
std::string folded(const Profile &profile, size_t value);

// profile.proto's serialized bytes, uncompressed.
std::string encode_pprof(const Profile &profile);

// gzip's format (RFC 1952) of `data`, as pprof files are.
std::string gzip(std::string_view data);

} // namespace memlat::profile
