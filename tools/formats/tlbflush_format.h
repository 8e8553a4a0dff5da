// tlbflush's output views, apart from the tool so that the unit tests reach them. So far the
// per-event view (-t); the counts, culprits and latency views are still in tools/tlbflush.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tlbflush.h"

namespace memlat::tlbflush {

// -t: the header, with a TIME column first under -T.
std::string event_header(bool timestamp);
// -t: one flush, `time_s` seconds after the first one printed, its reason named `reason`;
// `wall_time` (HH:MM:SS) leads the line under -T and is "" otherwise.
std::string event_line(const tlbflush_event &e, double time_s, std::string_view reason,
                       std::string_view wall_time);
// -t -j: the same as one JSON object ("pages" null and "full" true for a full flush).
nlohmann::json event_json(const tlbflush_event &e, double time_s, std::string_view reason,
                          std::string_view wall_time);

} // namespace memlat::tlbflush
