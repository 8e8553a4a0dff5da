// A terminal taken over by a full-screen view (memlat top), through ncurses (Debian's, linked
// statically): the terminal's own capabilities from its terminfo entry, keys as the terminal
// sends them, resizes (SIGWINCH), Ctrl-Z (ncurses gives the terminal back while stopped), and
// the terminal restored as it was when the view ends. Text is drawn as ASCII: another
// character shows as '?'.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

struct screen; // ncurses' SCREEN

namespace memlat {

// One key press: a character, or a key that sends an escape sequence.
struct Key {
    enum Special {
        None,
        Up,
        Down,
        Left,
        Right,
        PageUp,
        PageDown,
        Home,
        End,
        Enter,
        Escape,
        Backspace,
        Resize, // the terminal's size changed
    };
    Special special = None;
    char ch = 0; // when special is None
    bool operator==(const Key &) const = default;
};

// The key of one ncurses getch() value (a character, or a KEY_* code); nothing (special None,
// ch 0) for a key the view does not use.
Key key_of(int curses_key);

// Marks in a screen line that switch its style, as SGR sequences so that the same lines can be
// printed to a plain terminal: draw() turns them into ncurses attributes.
inline constexpr std::string_view reverse_video = "\033[7m";
inline constexpr std::string_view bold = "\033[1m";
inline constexpr std::string_view normal_video = "\033[0m";
// Colours, where the terminal has them and NO_COLOR is not set (no-color.org): red (else
// bold) for what needs a look first, yellow (else nothing) for what is worth one.
inline constexpr std::string_view alarm_colour = "\033[31m";
inline constexpr std::string_view warning_colour = "\033[33m";

class FullScreen {
  public:
    // Takes the terminal on stdout (keys from stdin); a RuntimeError when the terminal's type
    // ($TERM) has no terminfo entry on this host.
    FullScreen();
    ~FullScreen();
    FullScreen(const FullScreen &) = delete;
    FullScreen &operator=(const FullScreen &) = delete;

    // Waits at most `timeout` for a key and returns the keys pressed (none on a timeout).
    std::vector<Key> read_keys(std::chrono::milliseconds wait);
    // Rows and columns.
    std::pair<size_t, size_t> size() const;
    // Replaces the screen with `lines`, each cut to the width, styled by the marks above.
    void draw(const std::vector<std::string> &lines) const;

  private:
    ::screen *screen_ = nullptr; // ended by the destructor
    bool colours_ = false;
};

// `text` cut to `columns` on the terminal, style marks kept whole (and a reset added after a
// cut inside styled text).
std::string cut_to_width(std::string_view text, size_t columns);

} // namespace memlat
