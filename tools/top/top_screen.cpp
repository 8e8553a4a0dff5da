#include "top/top_live.h"

#include <algorithm>
#include <fmt/format.h>

#include "cli/run_loop.h"

namespace memlat::top {

namespace {

constexpr const char *help_text[] = {
    "memlat top: keys",
    "",
    "  Up, k / Down, j     select the cgroup above / below",
    "  PgUp / PgDn         a screen up / down",
    "  Home / End          the first / the last cgroup",
    "  Enter, Right        open the selected cgroup into its processes, and there the",
    "                      selected process into its threads",
    "  Esc, Left, Bksp     back: from the threads to the processes, to the cgroups",
    "  < / >               sort by the column before / after",
    "  a                   every memory cgroup, or only those that stalled",
    "  /                   only the cgroups whose path or name has a text (Enter sets",
    "                      it, Esc leaves it as it was; an empty text shows all)",
    "  n                   names (pods, containers, units) or the cgroups' paths",
    "  space               hold the screen as it is / go on (counting goes on)",
    "  d, s                change the interval (seconds)",
    "  t / T               replay (--replay): the next / the previous interval",
    "  h, ?                this page (any key returns)",
    "  q                   quit",
    "",
    "Columns: memlat top -h. Causes: memstall -h.",
};

} // namespace

// The rows of the table that fit under the header and above the status line.
size_t Top::table_rows() const {
    // The header's lines as the screen folds them, the table's heading, the status.
    const auto [screen_rows, columns] = screen_->size();
    const std::string header = have_interval_ ? top::fold_lines(full_header(), columns) : "";
    const size_t header_rows =
        have_interval_ ? static_cast<size_t>(std::count(header.begin(), header.end(), '\n'))
                       : top::header_lines;
    const size_t around = header_rows + 1 + 1;
    size_t fit = screen_rows > around ? screen_rows - around : 1;
    return o_.rows != 0 ? std::min<size_t>(fit, o_.rows) : fit;
}

std::vector<size_t> Top::visible() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < rows_.size(); ++i)
        if (top::row_matches(rows_[i], view_.filter))
            out.push_back(i);
    return out;
}

size_t Top::selected_index() const {
    const auto rows = visible();
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows_[rows[i]].id == view_.selected)
            return i;
    return 0;
}

void Top::select_index(size_t index) {
    const auto rows = visible();
    if (rows.empty())
        return;
    index = std::min(index, rows.size() - 1);
    view_.selected = rows_[rows[index]].id;
    const size_t fit = table_rows();
    if (index < view_.first_row)
        view_.first_row = index;
    else if (index >= view_.first_row + fit)
        view_.first_row = index + 1 - fit;
}

// The processes of cgroup `id` that stalled in the last interval, memstall's table.
std::vector<memstall::Row> Top::stalled_in(uint64_t id, std::optional<uint64_t> pid) const {
    auto in_cgroup = [&](const memstall::Snapshot &s) {
        memstall::Snapshot out;
        for (const auto &[key, value] : s)
            if (value.cgroup_id == id && (!pid || value.pid == *pid))
                out.emplace(key, value);
        return out;
    };
    auto rows = memstall::rows(in_cgroup(interval_now_), in_cgroup(interval_before_),
                               pid ? memstall::Grouping::Thread : memstall::Grouping::Process, {});
    std::erase_if(rows, [](const memstall::Row &r) { return r.total_ns() == 0; });
    return rows;
}

// A cgroup opened: its processes, the selected one in reverse video; or one process opened:
// its threads.
void Top::draw_opened(std::vector<std::string> &lines, size_t fit, std::string &status) {
    const uint64_t id = *view_.opened;
    auto row = std::find_if(rows_.begin(), rows_.end(), [&](const auto &r) { return r.id == id; });
    const std::string path = row != rows_.end()
                                 ? row->path
                                 : (dirs_.contains(id) ? dirs_.at(id).substr(mount_.size())
                                                       : fmt::format("cgroup id {}", id));
    const auto grouping =
        view_.opened_pid ? memstall::Grouping::Thread : memstall::Grouping::Process;
    const auto stalled = stalled_in(id, view_.opened_pid);
    if (view_.opened_pid)
        lines.push_back(fmt::format("Threads of process {} in {}:", *view_.opened_pid,
                                    path.empty() ? "/" : path));
    else if (row != rows_.end() && !row->name.empty() && row->name != path)
        lines.push_back(fmt::format("Processes of {} ({}):", row->name, path));
    else
        lines.push_back(fmt::format("Processes of {}:", path.empty() ? "/" : path));
    lines.push_back(std::string(bold) + memstall::header(grouping) + std::string(normal_video));
    size_t selected = 0;
    for (size_t i = 0; i < stalled.size(); ++i)
        if (stalled[i].id == view_.selected_pid)
            selected = i;
    for (size_t i = 0; i < stalled.size() && i + 1 < fit; ++i) {
        memstall::Row row = stalled[i];
        // Only the rows on the screen: each read takes the process's mmap_lock. A replay has
        // no titles (the processes are not this machine's now).
        if (!view_.opened_pid && replay_ == nullptr)
            row.title = titles_.of(static_cast<uint32_t>(row.id));
        std::string line = memstall::line(row, host_.interval_s, grouping);
        if (!view_.opened_pid && i == selected)
            line = std::string(reverse_video) + line + std::string(normal_video);
        lines.push_back(std::move(line));
    }
    if (!threads_recorded_)
        lines.emplace_back("(the record has no processes: -j wrote it, not -o)");
    else if (stalled.empty())
        lines.emplace_back(view_.opened_pid
                               ? "(no thread of this process stalled in the interval)"
                               : "(no process of this cgroup stalled in the interval)");
    if (view_.opened_pid)
        add_stacks(lines, static_cast<uint32_t>(*view_.opened_pid));
    status =
        view_.opened_pid ? "Esc back  h help  q quit" : "Enter threads  Esc back  h help  q quit";
}

// Under a process's threads, its stacks that stalled the longest per cause since top started
// (-s), as many lines of them as fit.
void Top::add_stacks(std::vector<std::string> &lines, uint32_t pid) const {
    // Above the status line: the threads may have taken every row.
    const size_t last = screen_->size().first - 1;
    if (lines.size() + 2 > last)
        return;
    // Symbolized once an interval: the screen is drawn again at every key.
    if (!stacks_cache_ || stacks_cache_->first != std::pair{pid, refreshes_})
        stacks_cache_.emplace(std::pair{pid, refreshes_},
                              source_ ? source_->stacks_of(pid, stacks_per_cause) : std::nullopt);
    const auto &stacks = stacks_cache_->second;
    lines.emplace_back();
    if (!stacks) {
        lines.emplace_back(source_ ? "(the stacks of a process: memlat top -s)"
                                   : "(the stacks are not recorded)");
        return;
    }
    if (stacks->empty()) {
        lines.emplace_back("(no stack of this process stalled since memlat top started)");
        return;
    }
    const std::string text = memstall::stacks_text(*stacks);
    std::string_view rest = text;
    for (std::string_view line; next_line(rest, line) && lines.size() < last;)
        if (!line.empty() || !lines.back().empty())
            lines.emplace_back(line);
}

// Up, Down, Home, End and Enter among a cgroup's processes.
void Top::move_in_processes(const Key &k) {
    const auto stalled = stalled_in(*view_.opened, std::nullopt);
    if (stalled.empty())
        return;
    size_t at = 0;
    for (size_t i = 0; i < stalled.size(); ++i)
        if (stalled[i].id == view_.selected_pid)
            at = i;
    if (k.special == Key::Up || (k.special == Key::None && k.ch == 'k'))
        at = at > 0 ? at - 1 : 0;
    else if (k.special == Key::Down || (k.special == Key::None && k.ch == 'j'))
        at = std::min(at + 1, stalled.size() - 1);
    else if (k.special == Key::Home)
        at = 0;
    else if (k.special == Key::End)
        at = stalled.size() - 1;
    view_.selected_pid = stalled[at].id;
    if (k.special == Key::Enter || k.special == Key::Right)
        view_.opened_pid = stalled[at].id;
}

void Top::draw() {
    if (view_.help) {
        screen_->draw(std::vector<std::string>(std::begin(help_text), std::end(help_text)));
        return;
    }
    if (!have_interval_)
        return;
    const auto [screen_rows, columns] = screen_->size();
    if (screen_rows < min_rows || columns < min_columns) {
        screen_->draw({fmt::format("terminal too small: {}x{}", columns, screen_rows),
                       fmt::format("memlat top needs {}x{}", min_columns, min_rows), "(q quits)"});
        return;
    }
    const top::TableLayout layout = top::fit_layout(columns, min_path_width, weights_);
    std::vector<std::string> lines;
    const std::string header = top::fold_lines(full_header(), columns);
    std::string_view rest = header;
    for (std::string_view line; next_line(rest, line);)
        lines.emplace_back(line);
    const size_t fit = table_rows();
    std::string status;
    if (view_.opened) {
        draw_opened(lines, fit, status);
    } else {
        // The heading, the sorted column's name in bold.
        std::string heading = top::table_heading(layout);
        const std::string key = top::sort_key_name(view_.sort);
        if (auto at = heading.find(key); at != std::string::npos)
            heading = heading.substr(0, at) + std::string(reverse_video) + key +
                      std::string(normal_video) + std::string(bold) +
                      heading.substr(at + key.size());
        lines.push_back(std::string(bold) + heading + std::string(normal_video));
        const auto rows = visible();
        const size_t selected = selected_index();
        if (view_.first_row > selected || view_.first_row >= rows.size())
            view_.first_row = std::min(selected, view_.first_row);
        if (selected >= view_.first_row + fit)
            view_.first_row = selected + 1 - fit;
        for (size_t i = view_.first_row; i < rows.size() && i < view_.first_row + fit; ++i) {
            read_files(rows_[rows[i]]);
            top::CgroupInterval shown = rows_[rows[i]];
            if (view_.names && !shown.name.empty())
                shown.path = shown.name;
            std::string line = top::row_text(shown, host_.interval_s, layout);
            // Stalled at all in yellow, a tenth of the interval or more in red; the selected
            // row in reverse video as well.
            const double share = memstall::share_percent(shown.stall_ns(), host_.interval_s);
            std::string style = share >= alarm_share ? std::string(alarm_colour)
                                : share > 0          ? std::string(warning_colour)
                                                     : std::string();
            if (i == selected) {
                line.resize(std::max(line.size(), columns), ' ');
                style += reverse_video;
            }
            if (!style.empty())
                line = style + line + std::string(normal_video);
            lines.push_back(std::move(line));
        }
        if (rows.empty())
            lines.emplace_back(!view_.filter.empty()
                                   ? "(no cgroup matches the filter; /: change it, Esc: drop it)"
                               : all_ ? "(no memory cgroup)"
                                      : "(no memory cgroup stalled in the interval; a: all)");
        const std::string matching =
            view_.filter.empty() ? "" : fmt::format(" matching '{}'", view_.filter);
        // A replay shows the rows recorded: no a key.
        const std::string all_key =
            replay_ != nullptr ? "" : (all_ ? "  a stalled only" : "  a all");
        status =
            fmt::format("{} of {}{}  Enter processes  < > sort: {}  / filter{}  n {}  "
                        "h help  q quit",
                        rows.empty() ? 0 : selected + 1, rows.size(), matching,
                        top::sort_key_name(view_.sort), all_key, view_.names ? "paths" : "names");
    }
    if (replay_ != nullptr)
        status = fmt::format("REPLAY {} of {}{} (t/T)  ", replay_at_ + 1, replay_->size(),
                             replay_at_ + 1 == replay_->size() ? ", the end" : "") +
                 status;
    if (!view_.message.empty() && std::chrono::steady_clock::now() < view_.message_until)
        status = view_.message + "  " + status;
    if (view_.typing)
        status = fmt::format("filter: {}_  (Enter: set, Esc: leave it)", *view_.typing);
    if (view_.typing_interval)
        status = fmt::format("interval in seconds: {}_  (Enter: set, Esc: leave it as {:g})",
                             *view_.typing_interval, o_.common.interval);
    if (view_.paused)
        status = "PAUSED (space: go on)  " + status;
    while (lines.size() + 1 < screen_rows)
        lines.emplace_back();
    // One column short of the width: curses does not write the last line's last cell.
    lines.push_back(std::string(reverse_video) + top::fit_status(status, columns - 1) +
                    std::string(normal_video));
    screen_->draw(lines);
}

// A key while the filter or the interval is typed: true when it was taken.
bool Top::on_typing(const Key &k) {
    std::optional<std::string> &typing = view_.typing ? view_.typing : view_.typing_interval;
    if (!typing)
        return false;
    if (k.special == Key::Enter) {
        if (view_.typing) {
            view_.filter = *typing;
            view_.first_row = 0;
        } else if (!typing->empty()) {
            try {
                o_.common.interval = parse_seconds(*typing, "the interval", min_interval);
                view_.say(fmt::format("interval {:g} s", o_.common.interval));
            } catch (const UsageError &e) {
                view_.say(e.what());
            }
        }
        typing.reset();
    } else if (k.special == Key::Escape) {
        typing.reset();
    } else if (k.special == Key::Backspace) {
        if (!typing->empty())
            typing->pop_back();
    } else if (k.special == Key::None && k.ch >= 0x20 && k.ch < 0x7f && typing->size() < 64) {
        *typing += k.ch;
    }
    return true;
}

void Top::on_keys(const std::vector<Key> &keys) {
    for (const Key &k : keys) {
        if (view_.help) { // any key leaves the help page
            view_.help = false;
            continue;
        }
        if (on_typing(k))
            continue;
        // Inside an opened cgroup the moving keys select a process, Enter opens it.
        const bool moves = k.special == Key::Up || k.special == Key::Down ||
                           k.special == Key::Home || k.special == Key::End ||
                           k.special == Key::Enter || k.special == Key::Right ||
                           (k.special == Key::None && (k.ch == 'j' || k.ch == 'k'));
        if (view_.opened && moves) {
            if (!view_.opened_pid)
                move_in_processes(k);
            continue;
        }
        const size_t at = selected_index();
        const size_t page = table_rows();
        switch (k.special) {
        case Key::Up:
            select_index(at > 0 ? at - 1 : 0);
            break;
        case Key::Down:
            select_index(at + 1);
            break;
        case Key::PageUp:
            select_index(at > page ? at - page : 0);
            break;
        case Key::PageDown:
            select_index(at + page);
            break;
        case Key::Home:
            select_index(0);
            break;
        case Key::End:
            select_index(visible().size());
            break;
        case Key::Enter:
        case Key::Right:
            if (const auto rows = visible(); !rows.empty() && !view_.opened)
                view_.opened = rows_[rows[at]].id;
            break;
        case Key::Escape:
        case Key::Left:
        case Key::Backspace:
            // Back from a process's threads, from a cgroup's processes; in the cgroups, Esc
            // drops the filter.
            if (view_.opened_pid) {
                view_.opened_pid.reset();
            } else if (view_.opened) {
                view_.opened.reset();
                view_.selected_pid = 0;
            } else if (k.special == Key::Escape)
                view_.filter.clear();
            break;
        case Key::None:
            switch (k.ch) {
            case 'q':
            case 'Q':
                request_stop();
                return;
            case 'h':
            case '?':
                view_.help = true;
                break;
            case 'k':
                select_index(at > 0 ? at - 1 : 0);
                break;
            case 'j':
                select_index(at + 1);
                break;
            case ' ':
                view_.paused = !view_.paused;
                break; // shown from the next interval
            case 'a':
                if (replay_ != nullptr)
                    view_.say("a replay shows the rows recorded");
                else
                    all_ = !all_;
                break; // from the next interval
            case 'd':
            case 's':
                view_.typing_interval = "";
                break;
            case 't':
            case 'T':
                if (replay_ != nullptr)
                    show_recorded(k.ch == 't' ? replay_at_ + 1
                                              : (replay_at_ > 0 ? replay_at_ - 1 : 0));
                break;
            case 'n':
                view_.names = !view_.names;
                break;
            case '/':
                if (!view_.opened)
                    view_.typing = view_.filter;
                break;
            case '<':
            case '>': {
                const auto &keys_list = top::sort_keys;
                size_t i =
                    std::find(keys_list.begin(), keys_list.end(), view_.sort) - keys_list.begin();
                i = k.ch == '>' ? (i + 1) % keys_list.size()
                                : (i + keys_list.size() - 1) % keys_list.size();
                view_.sort = keys_list[i];
                if (top::sort_needs_files(view_.sort))
                    for (auto &r : rows_)
                        read_files(r);
                top::sort_rows(rows_, view_.sort);
                break;
            }
            default:
                break;
            }
            break;
        default:
            break;
        }
    }
    draw();
}

// The screen until q, a stop signal, -d or COUNT: keys as they are pressed, and a refresh
// each interval.
void run_screen(const TopOptions &o, FullScreen &screen, Top &top) {
    auto read_keys = [&](std::chrono::milliseconds timeout) {
        if (auto keys = screen.read_keys(timeout); !keys.empty())
            top.on_keys(keys);
    };
    run_until_stopped(o.common, read_keys, [&] { top.refresh(); });
}

} // namespace memlat::top
