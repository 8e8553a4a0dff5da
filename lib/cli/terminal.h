// A terminal taken over by a full-screen view (memlat top): the alternate screen, no cursor,
// keys read one at a time without echo; everything given back as it was when the view ends.
// Plain ANSI/VT100 sequences, which every terminal emulator in use understands: no curses
// library, no terminfo database to find on a host the binary was copied to.
#pragma once

#include <termios.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
        Backspace
    };
    Special special = None;
    char ch = 0; // when special is None
    bool operator==(const Key &) const = default;
};

// The keys in bytes read from a terminal in raw mode. An escape sequence this does not know
// is dropped whole; an ESC with nothing after it is the Escape key.
std::vector<Key> parse_keys(std::string_view bytes);

// SGR sequences for the screen's text.
inline constexpr std::string_view reverse_video = "\033[7m";
inline constexpr std::string_view bold = "\033[1m";
inline constexpr std::string_view normal_video = "\033[0m";

class FullScreen {
  public:
    // Takes the terminal on stdout; keys are read from stdin when it is a terminal too (else
    // the view shows but only signals end it). Ctrl-Z is turned off while the view runs: a
    // stopped view would leave the shell with no echo on the alternate screen.
    FullScreen();
    ~FullScreen();
    FullScreen(const FullScreen &) = delete;
    FullScreen &operator=(const FullScreen &) = delete;

    bool reads_keys() const { return keys_; }
    // Waits at most `timeout` for input and returns the keys it brought (none on a timeout,
    // a signal or when stdin is no terminal, after sleeping).
    std::vector<Key> read_keys(std::chrono::milliseconds timeout);
    // Rows and columns (24 x 80 when the terminal does not say).
    std::pair<size_t, size_t> size() const;
    // Replaces the screen with `lines`, each cut to the width.
    void draw(const std::vector<std::string> &lines) const;

  private:
    bool keys_ = false;
    termios saved_{};
};

// The number of columns `text` takes on a terminal: its UTF-8 characters outside the escape
// sequences (each one column wide).
size_t display_width(std::string_view text);

// `text` cut to `columns` on the terminal, escape sequences kept whole (and a reset added
// after a cut inside styled text).
std::string cut_to_width(std::string_view text, size_t columns);

} // namespace memlat
