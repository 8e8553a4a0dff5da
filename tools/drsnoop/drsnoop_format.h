// drsnoop's output lines, apart from the tool so the unit tests can check them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "drsnoop.h"
#include "kernel/gfp.h"

namespace memlat::drsnoop {

struct LineFormat {
    bool timestamp = false; // TIME(s) column: seconds since the first stall began
    bool uid = false;
    bool extended = false;
    long page_kb = 4;
    // -t: the second column is the thread, named TID as in BCC, and -e's id column the PID.
    bool by_thread = false;
};

const char *kind_name(uint32_t kind);
std::string header(const LineFormat &f);
std::string line(const drsnoop_event &e, double time_s, const LineFormat &f, const GfpNames &gfp);
nlohmann::json json_event(const drsnoop_event &e, double time_s, const LineFormat &f,
                          const GfpNames &gfp);

} // namespace memlat::drsnoop
