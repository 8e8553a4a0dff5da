#include "cli/profile_output.h"

#include <fmt/format.h>

#include "base/errors.h"

namespace memlat {

void add_profile_options(CommandLine &cli, ProfileOutputOptions &options, char file_key,
                         std::string_view what, std::string_view value, std::string_view pprof) {
    cli.flag(0, "folded",
             fmt::format("At the end, print {} folded (one line per stack, root frame first, "
                         "then {}) for flamegraph.pl, inferno or speedscope, instead of the "
                         "usual output",
                         what, value),
             options.folded);
    cli.option(file_key, "folded-file", "FILE",
               "At the end, write the folded stacks to FILE (as --folded), beside the usual "
               "output",
               options.folded_file);
    cli.option(0, "pprof", "FILE",
               fmt::format("At the end, write {} as a pprof profile (gzip-compressed "
                           "profile.proto: {}) for go tool pprof",
                           what, pprof),
               options.pprof_file);
}

void ProfileOutputs::open(const ProfileOutputOptions &options, const CommonOptions &common) {
    options_ = options;
    if (options.folded && (common.json || common.interval > 0))
        throw UsageError("--folded prints the folded stacks alone, at the end: it takes no -j or "
                         "interval (--folded-file FILE writes them beside those)");
    if (!options.folded_file.empty())
        folded_ = OutputFile(options.folded_file, "--folded-file");
    if (!options.pprof_file.empty())
        pprof_ = OutputFile(options.pprof_file, "--pprof");
}

void ProfileOutputs::write(const profile::Profile &profile, size_t folded_value) {
    if (options_.folded || folded_.is_open()) {
        const std::string folded = profile::folded(profile, folded_value);
        if (options_.folded) {
            fmt::print("{}", folded);
            flush_output();
        }
        if (folded_.is_open())
            folded_.write_and_close(folded);
    }
    if (pprof_.is_open())
        pprof_.write_and_close(profile::gzip(profile::encode_pprof(profile)));
}

} // namespace memlat
