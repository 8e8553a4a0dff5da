// The profile outputs the tools with stacks offer (memstall, tlbflush, compactsnoop): --folded
// (folded stacks on stdout at the end, instead of the tool's own output), --folded-file FILE and
// --pprof FILE. Files are opened when the options are checked: a path that cannot be written is a
// usage error before anything is loaded.
#pragma once

#include <string>
#include <string_view>

#include "base/profile.h"
#include "cli/options.h"
#include "cli/output.h"

namespace memlat {

struct ProfileOutputOptions {
    bool folded = false;     // --folded
    std::string folded_file; // --folded-file
    std::string pprof_file;  // --pprof
    bool wanted() const { return folded || !folded_file.empty() || !pprof_file.empty(); }
};

// Adds --folded, -f/--folded-file FILE (`file_key`: its short option, 0 for none) and --pprof
// FILE; `what` says what the stacks are ("the stalled stacks"), `value` what a folded line's
// value is and its root frames, `pprof` the profile's sample types and labels.
void add_profile_options(CommandLine &cli, ProfileOutputOptions &options, char file_key,
                         std::string_view what, std::string_view value, std::string_view pprof);

class ProfileOutputs {
  public:
    // Checks the options against the tool's others (--folded prints alone: no -j, no interval)
    // and opens the files; UsageError naming what is wrong.
    void open(const ProfileOutputOptions &options, const CommonOptions &common);
    bool wanted() const { return options_.wanted(); }
    // Folded stacks print alone on stdout: the tool's own output is left out.
    bool replaces_output() const { return options_.folded; }
    // Writes the profile: folded stacks of the sample type `folded_value`, and pprof.
    void write(const profile::Profile &profile, size_t folded_value);

  private:
    ProfileOutputOptions options_;
    OutputFile folded_, pprof_;
};

} // namespace memlat
