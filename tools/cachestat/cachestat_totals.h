// cachestat's run totals per process and per file, from the BPF side's entries: the gains
// of an interval added up, the cumulative view carried from interval to interval, and the
// exit summary's rows, bounded however many processes or files the run saw.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include "cachestat.h"
#include "cachestat_format.h"

namespace memlat::cachestat {

// Adds what `now` counted beyond `seen` (nullptr: nothing seen) to `into`, whose other fields
// (name, user, last process) become `now`'s.
template <typename Value>
void add_gain(Value &into, const Value &now, const std::type_identity_t<Value> *seen) {
    Value v = now;
    for (int i = 0; i < CACHESTAT_COUNTERS; ++i)
        v.counts.c[i] = into.counts.c[i] + now.counts.c[i] - (seen ? seen->counts.c[i] : 0);
    into = v;
}

template <typename Value>
void add_entry(Value &into, const Value &entry) {
    add_gain(into, entry, nullptr);
}

// `totals` becomes the keys of `gained` with their run totals: the snapshot's cumulative view,
// without the keys idle for an interval (their BPF entries are gone too).
template <typename Key, typename Value>
void carry(std::map<Key, Value> &totals, const std::map<Key, Value> &gained) {
    std::map<Key, Value> next;
    for (const auto &[k, g] : gained) {
        auto it = totals.find(k);
        Value v = it == totals.end() ? Value{} : it->second;
        add_gain(v, g, nullptr);
        next[k] = v;
    }
    totals = std::move(next);
}

// The exit summary's rows: each key's run total, at most `limit` of them. Beyond twice that
// the least active go (their counts stay in the summary's totals line), so that a run over
// millions of short-lived processes holds a bounded table.
template <typename Key, typename Value>
class SummaryRows {
  public:
    explicit SummaryRows(size_t limit) : limit_(limit) {}
    void add(const std::map<Key, Value> &gained) {
        for (const auto &[k, g] : gained)
            add_gain(rows_[k], g, nullptr);
        if (rows_.size() > 2 * limit_)
            keep_most_active();
    }
    // The rows to print: the `limit` most active.
    const std::map<Key, Value> &rows() {
        keep_most_active();
        return rows_;
    }
    uint64_t left_out() const { return left_out_; }

  private:
    void keep_most_active() {
        if (rows_.size() <= limit_)
            return;
        std::vector<std::pair<uint64_t, Key>> by_activity;
        for (const auto &[k, v] : rows_)
            by_activity.emplace_back(cachestat::counts_of(v.counts).activity(), k);
        std::nth_element(by_activity.begin(), by_activity.begin() + limit_, by_activity.end(),
                         [](const auto &a, const auto &b) { return a.first > b.first; });
        for (auto it = by_activity.begin() + limit_; it != by_activity.end(); ++it)
            rows_.erase(it->second);
        left_out_ += by_activity.size() - limit_;
    }

    size_t limit_;
    std::map<Key, Value> rows_;
    uint64_t left_out_ = 0; // rows dropped (a key dropped twice counts twice)
};

} // namespace memlat::cachestat
