#include "cli/terminal.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace memlat {

namespace {

// The length of the escape sequence at the start of `s` (which begins with ESC): CSI
// (ESC [ ... final byte 0x40-0x7e), SS3 (ESC O x), or ESC and one more byte; 0 when `s` ends
// inside the sequence.
size_t escape_length(std::string_view s) {
    if (s.size() < 2)
        return 0;
    if (s[1] == '[') {
        for (size_t i = 2; i < s.size(); ++i)
            if (s[i] >= 0x40 && s[i] <= 0x7e)
                return i + 1;
        return 0;
    }
    return s.size() >= 3 && s[1] == 'O' ? 3 : (s[1] == 'O' ? 0 : 2);
}

Key::Special csi_key(std::string_view seq) {
    // seq is the whole sequence: ESC [ params final, or ESC O final.
    const char final = seq.back();
    const std::string_view params = seq.substr(2, seq.size() - 3);
    switch (final) {
    case 'A':
        return Key::Up;
    case 'B':
        return Key::Down;
    case 'C':
        return Key::Right;
    case 'D':
        return Key::Left;
    case 'H':
        return Key::Home;
    case 'F':
        return Key::End;
    case '~':
        if (params == "5")
            return Key::PageUp;
        if (params == "6")
            return Key::PageDown;
        if (params == "1" || params == "7")
            return Key::Home;
        if (params == "4" || params == "8")
            return Key::End;
        return Key::None;
    default:
        return Key::None;
    }
}

void write_all(std::string_view s) {
    while (!s.empty()) {
        const ssize_t n = write(STDOUT_FILENO, s.data(), s.size());
        if (n <= 0)
            return; // the terminal went away: nothing left to restore it on
        s.remove_prefix(static_cast<size_t>(n));
    }
}

constexpr std::string_view enter_screen = "\033[?1049h\033[?25l\033[H\033[2J";
constexpr std::string_view leave_screen = "\033[0m\033[?25h\033[?1049l";

} // namespace

std::vector<Key> parse_keys(std::string_view bytes) {
    std::vector<Key> keys;
    while (!bytes.empty()) {
        const char c = bytes.front();
        if (c == '\033') {
            const size_t n = escape_length(bytes);
            if (n == 0 && bytes.size() == 1) {
                keys.push_back({Key::Escape});
                break;
            }
            if (n == 0) // cut short: drop what is left
                break;
            if (n == 2 && bytes[1] == '\033') { // ESC ESC: Escape, then look again
                keys.push_back({Key::Escape});
                bytes.remove_prefix(1);
                continue;
            }
            if (const auto special = n >= 3 ? csi_key(bytes.substr(0, n)) : Key::None;
                special != Key::None)
                keys.push_back({special});
            bytes.remove_prefix(n);
            continue;
        }
        if (c == '\r' || c == '\n')
            keys.push_back({Key::Enter});
        else if (c == 0x7f || c == '\b')
            keys.push_back({Key::Backspace});
        else
            keys.push_back({Key::None, c});
        bytes.remove_prefix(1);
    }
    return keys;
}

FullScreen::FullScreen() {
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
        termios raw = saved_;
        // No line editing and no echo; signals stay (Ctrl-C ends the view as it ends every
        // tool), but not Ctrl-Z (see the header).
        raw.c_lflag &= ~(ICANON | ECHO);
        raw.c_cc[VSUSP] = _POSIX_VDISABLE;
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        keys_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    write_all(enter_screen);
}

FullScreen::~FullScreen() {
    write_all(leave_screen);
    if (keys_)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
}

std::vector<Key> FullScreen::read_keys(std::chrono::milliseconds timeout) {
    pollfd pfd{keys_ ? STDIN_FILENO : -1, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0 || !(pfd.revents & POLLIN))
        return {};
    char buf[64];
    const ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n <= 0)
        return {};
    std::string bytes(buf, static_cast<size_t>(n));
    // An escape sequence can arrive in two reads: wait a little for its rest.
    if (bytes.back() == '\033' || (bytes.size() >= 2 && bytes[bytes.size() - 2] == '\033')) {
        pollfd more{STDIN_FILENO, POLLIN, 0};
        if (poll(&more, 1, 25) > 0)
            if (const ssize_t m = read(STDIN_FILENO, buf, sizeof(buf)); m > 0)
                bytes.append(buf, static_cast<size_t>(m));
    }
    return parse_keys(bytes);
}

std::pair<size_t, size_t> FullScreen::size() const {
    winsize ws{};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0)
        return {24, 80};
    return {ws.ws_row, ws.ws_col};
}

void FullScreen::draw(const std::vector<std::string> &lines) const {
    const auto [rows, columns] = size();
    // Home, then each line cut to the width and the rest of it cleared; the rest of the screen
    // cleared last. Nothing is written past the last row, so a full screen does not scroll.
    std::string out = "\033[H";
    for (size_t i = 0; i < lines.size() && i < rows; ++i) {
        if (i > 0)
            out += "\r\n";
        out += cut_to_width(lines[i], columns);
        out += "\033[K";
    }
    out += "\033[J";
    write_all(out);
}

size_t display_width(std::string_view text) {
    size_t width = 0;
    for (size_t i = 0; i < text.size();) {
        if (text[i] == '\033') {
            const size_t n = escape_length(text.substr(i));
            i += n == 0 ? text.size() - i : n;
            continue;
        }
        // A UTF-8 character's continuation bytes take no column.
        if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80)
            ++width;
        ++i;
    }
    return width;
}

std::string cut_to_width(std::string_view text, size_t columns) {
    std::string out;
    size_t width = 0;
    bool styled = false;
    for (size_t i = 0; i < text.size();) {
        if (text[i] == '\033') {
            size_t n = escape_length(text.substr(i));
            if (n == 0)
                n = text.size() - i;
            const std::string_view seq = text.substr(i, n);
            styled = seq != normal_video;
            out += seq;
            i += n;
            continue;
        }
        const bool starts_character = (static_cast<unsigned char>(text[i]) & 0xc0) != 0x80;
        if (starts_character && width == columns) {
            if (styled)
                out += normal_video;
            return out;
        }
        if (starts_character)
            ++width;
        out += text[i++];
    }
    return out;
}

} // namespace memlat
