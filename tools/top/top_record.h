// memlat top's record (-o FILE) and its replay (--replay FILE). A record is JSON lines, one object
// per interval: what -j prints (top_format.h's snapshot_json()) with every row, plus the
// interval's stalls per thread and cause, from which the replay opens a cgroup into its
// processes and threads as the live screen does. A file of -j lines replays too, without the
// processes and threads.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sources/stalls.h"
#include "top/top_format.h"

namespace memlat::top {

// One interval read back.
struct RecordedInterval {
    std::string time;
    // When the line was written ("timestamp", "epoch_ms"): null in a record older than them.
    nlohmann::json timestamp, epoch_ms;
    HostInterval host;
    std::vector<CgroupInterval> rows; // every row the line holds, with its files
    std::map<uint32_t, std::string> unmeasured;
    uint64_t table_full = 0;
    // The interval's stalls per thread and cause (-o): a snapshot whose values are what the
    // interval added, so that memstall::rows(threads, {}) gives the interval's rows. None in
    // a line of -j.
    std::optional<memstall::Snapshot> threads;
};

// The stalls `now` adds to `before`, per thread and cause: the entries that moved.
nlohmann::json threads_json(const memstall::Snapshot &now, const memstall::Snapshot &before);

// Reads back an object of snapshot_json(), with "threads" and "table_full" when it has them.
// Throws RuntimeError naming what is missing or malformed.
RecordedInterval interval_from_json(const nlohmann::json &line);

// A record, read whole when opened; each interval is parsed when it is asked for.
class Recording {
  public:
    // A UsageError when the file cannot be read or holds no interval.
    explicit Recording(const std::string &path);
    size_t size() const { return lines_.size(); }
    // A RuntimeError naming the file and the line when the line is not an interval.
    RecordedInterval at(size_t index) const;
    const std::string &path() const { return path_; }
    // The number of the line left out because the record ends in part of it (its writer was
    // killed, the disk was full), or 0.
    size_t cut_short() const { return cut_short_; }

  private:
    struct Line {
        size_t offset, length, number; // in the text; its number in the file, from 1
    };
    std::string path_;
    std::string text_;
    std::vector<Line> lines_; // the non-empty lines
    size_t cut_short_ = 0;
};

} // namespace memlat::top
