#include "cli/terminal.h"

#include <curses.h>

#include <cstdlib>

#include "base/errors.h"

namespace memlat {

namespace {

// The length of the escape sequence at the start of `s` (which begins with ESC): CSI
// (ESC [ ... final byte 0x40-0x7e) or ESC and one more byte; 0 when `s` ends inside it.
size_t escape_length(std::string_view s) {
    if (s.size() < 2)
        return 0;
    if (s[1] == '[') {
        for (size_t i = 2; i < s.size(); ++i)
            if (s[i] >= 0x40 && s[i] <= 0x7e)
                return i + 1;
        return 0;
    }
    return 2;
}

// The narrow ncurses draws bytes: each character outside ASCII (a UTF-8 sequence) and each
// control character becomes one '?', so that the columns stay where they were counted.
std::string ascii(std::string_view text) {
    std::string out;
    for (unsigned char c : text) {
        if ((c & 0xc0) == 0x80)
            continue; // a continuation byte: its character was written already
        out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
    }
    return out;
}

// The colour pairs init_pair() sets up.
constexpr short alarm_pair = 1, warning_pair = 2;

attr_t attribute_of(std::string_view mark, bool colours) {
    if (mark == reverse_video)
        return A_REVERSE;
    if (mark == bold)
        return A_BOLD;
    if (mark == alarm_colour)
        return colours ? COLOR_PAIR(alarm_pair) : A_BOLD;
    if (mark == warning_colour && colours)
        return COLOR_PAIR(warning_pair);
    return A_NORMAL;
}

} // namespace

Key key_of(int k) {
    switch (k) {
    case KEY_UP:
        return {Key::Up};
    case KEY_DOWN:
        return {Key::Down};
    case KEY_LEFT:
        return {Key::Left};
    case KEY_RIGHT:
        return {Key::Right};
    case KEY_PPAGE:
        return {Key::PageUp};
    case KEY_NPAGE:
        return {Key::PageDown};
    case KEY_HOME:
        return {Key::Home};
    case KEY_END:
        return {Key::End};
    case KEY_ENTER:
    case '\r':
    case '\n':
        return {Key::Enter};
    case KEY_BACKSPACE:
    case 0x7f:
    case '\b':
        return {Key::Backspace};
    case KEY_RESIZE:
        return {Key::Resize};
    case 27:
        return {Key::Escape};
    default:
        break;
    }
    if (k >= 0x20 && k < 0x7f)
        return {Key::None, static_cast<char>(k)};
    return {};
}

FullScreen::FullScreen() {
    // An ESC alone is the Escape key after 25 ms, not ncurses' default second.
    if (getenv("ESCDELAY") == nullptr)
        set_escdelay(25);
    screen_ = newterm(nullptr, stdout, stdin);
    if (screen_ == nullptr) {
        const char *term = getenv("TERM");
        throw RuntimeError(std::string("the terminal type TERM=") + (term ? term : "(unset)") +
                           " has no terminfo entry on this host: set TERM to one it has "
                           "(e.g. TERM=xterm), or use -b (text rows) or -j (JSON lines)");
    }
    // A terminal that cannot move the cursor (TERM=dumb, emacs' shell) would get each screen
    // appended to the last, unreadable.
    const char *cup = tigetstr(const_cast<char *>("cup"));
    if (cup == nullptr || cup == reinterpret_cast<char *>(-1)) {
        endwin();
        delscreen(screen_);
        const char *term = getenv("TERM");
        throw RuntimeError(std::string("the terminal type TERM=") + (term ? term : "(unset)") +
                           " cannot move the cursor, which the screen needs: use a terminal "
                           "that can (e.g. TERM=xterm), or -b (text rows) or -j (JSON lines)");
    }
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    const char *no_colour = getenv("NO_COLOR");
    if (has_colors() && (no_colour == nullptr || *no_colour == '\0') && start_color() == OK) {
        // The terminal's own background where it can keep it, else black.
        const short background = use_default_colors() == OK ? -1 : COLOR_BLACK;
        colours_ = init_pair(alarm_pair, COLOR_RED, background) == OK &&
                   init_pair(warning_pair, COLOR_YELLOW, background) == OK;
    }
}

FullScreen::~FullScreen() {
    endwin();
    delscreen(screen_);
}

std::vector<Key> FullScreen::read_keys(std::chrono::milliseconds wait) {
    std::vector<Key> keys;
    timeout(static_cast<int>(wait.count()));
    for (int k = getch(); k != ERR; k = getch()) {
        if (const Key key = key_of(k); key.special != Key::None || key.ch != 0)
            keys.push_back(key);
        timeout(0); // the keys already typed, without waiting again
    }
    return keys;
}

std::pair<size_t, size_t> FullScreen::size() const {
    return {static_cast<size_t>(std::max(LINES, 1)), static_cast<size_t>(std::max(COLS, 1))};
}

void FullScreen::draw(const std::vector<std::string> &lines) const {
    const auto [rows, columns] = size();
    erase();
    for (size_t y = 0; y < lines.size() && y < rows; ++y) {
        // The last column of the last row is left empty: writing it scrolls some terminals.
        const size_t width = y + 1 == rows ? columns - 1 : columns;
        const std::string line = cut_to_width(lines[y], width);
        std::string_view rest = line;
        move(static_cast<int>(y), 0);
        attrset(A_NORMAL);
        while (!rest.empty()) {
            if (rest.front() == '\033') {
                size_t n = escape_length(rest);
                if (n == 0)
                    break;
                // As SGR: the marks add up (a colour and reverse video), normal ends them.
                const std::string_view mark = rest.substr(0, n);
                if (mark == normal_video)
                    attrset(A_NORMAL);
                else
                    attron(attribute_of(mark, colours_));
                rest.remove_prefix(n);
                continue;
            }
            const size_t next = rest.find('\033');
            const std::string text = ascii(rest.substr(0, next));
            addnstr(text.data(), static_cast<int>(text.size()));
            rest.remove_prefix(std::min(next, rest.size()));
        }
    }
    attrset(A_NORMAL);
    refresh();
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
