// What the test workloads (tests/workloads/ on the host, tests/vm/guest/ in the VM guests)
// share. Header-only: each workload is one static binary of one source file.
#pragma once

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

namespace workload {

// perror(what) and exit 1: a workload that could not do its part must not exit as one that did,
// or a test would check a tool against work that never happened.
[[noreturn]] inline void die(const char *what) {
    perror(what);
    std::exit(1);
}

// The calling thread on `cpu` only (a workload that sends or receives IPIs, or touches memory
// from a chosen node, says where it runs).
inline void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        die("sched_setaffinity");
}

// One option of a workload's command line and the variable it sets. A bool is a flag: given
// without a value, it sets the variable true. Any other takes the next argument as its value;
// a number variable takes only a decimal number of its type (std::from_chars: no sign on an
// unsigned one, no fraction on an integer), where atol() would have read a typo as 0.
struct Option {
    template <typename Variable>
    Option(const char *option, Variable &sets) : name(option), variable(&sets) {}

    const char *name;
    std::variant<bool *, int *, long *, size_t *, double *, std::string *> variable;
};

// "WORKLOAD: WHAT" and exit 2: the command line is wrong, the work was not tried.
[[noreturn]] inline void bad_command_line(const char *workload, const std::string &what) {
    fprintf(stderr, "%s: %s\n", workload, what.c_str());
    std::exit(2);
}

// Sets the variables of `options` from argv[1..argc-1], in which every argument is an option
// of `options` or the value that follows one. Anything else exits (bad_command_line), so that
// a test's typo does not run the workload with a default the test did not mean.
inline void parse_options(const char *workload, int argc, char **argv,
                          std::initializer_list<Option> options) {
    for (int i = 1; i < argc; ++i) {
        const std::string name = argv[i];
        auto option = std::find_if(options.begin(), options.end(),
                                   [&name](const Option &o) { return name == o.name; });
        if (option == options.end())
            bad_command_line(workload, "unknown option " + name);
        if (bool *const *flag = std::get_if<bool *>(&option->variable)) {
            **flag = true;
            continue;
        }
        if (i + 1 >= argc)
            bad_command_line(workload, name + " needs a value");
        const std::string_view value = argv[++i];
        std::visit(
            [&](auto *variable) {
                using Value = std::remove_pointer_t<decltype(variable)>;
                if constexpr (std::is_same_v<Value, std::string>) {
                    *variable = value;
                } else if constexpr (!std::is_same_v<Value, bool>) { // (flags are set above)
                    const char *end = value.data() + value.size();
                    auto [stop, error] = std::from_chars(value.data(), end, *variable);
                    if (error != std::errc() || stop != end)
                        bad_command_line(workload, name + " takes a number, not '" +
                                                       std::string(value) + "'");
                }
            },
            option->variable);
    }
}

} // namespace workload
