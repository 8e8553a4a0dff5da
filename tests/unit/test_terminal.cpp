// The full-screen view's keys and line cutting (lib/cli/terminal.h).
#include <gtest/gtest.h>

#include "cli/terminal.h"

using namespace memlat;

TEST(Terminal, PlainKeys) {
    EXPECT_EQ((std::vector<Key>{{Key::None, 'q'}, {Key::None, '<'}, {Key::None, ' '}}),
              parse_keys("q< "));
    EXPECT_EQ((std::vector<Key>{{Key::Enter}, {Key::Enter}, {Key::Backspace}}),
              parse_keys("\r\n\x7f"));
}

TEST(Terminal, EscapeSequences) {
    // xterm's CSI and application-mode SS3 arrows, and the editing keys' CSI n ~.
    EXPECT_EQ((std::vector<Key>{{Key::Up}, {Key::Down}, {Key::Right}, {Key::Left}}),
              parse_keys("\033[A\033OB\033[C\033OD"));
    EXPECT_EQ((std::vector<Key>{{Key::PageUp}, {Key::PageDown}, {Key::Home}, {Key::End}}),
              parse_keys("\033[5~\033[6~\033[H\033[4~"));
    // A key with modifiers (Ctrl-Up: ESC [ 1 ; 5 A) is still the arrow.
    EXPECT_EQ((std::vector<Key>{{Key::Up}}), parse_keys("\033[1;5A"));
}

TEST(Terminal, EscapeAloneAndUnknown) {
    EXPECT_EQ((std::vector<Key>{{Key::Escape}}), parse_keys("\033"));
    EXPECT_EQ((std::vector<Key>{{Key::Escape}, {Key::Up}}), parse_keys("\033\033[A"));
    // F5 (ESC [ 1 5 ~) is not used: dropped whole, the key after it kept.
    EXPECT_EQ((std::vector<Key>{{Key::None, 'j'}}), parse_keys("\033[15~j"));
    // Cut inside a sequence: what is left is dropped.
    EXPECT_EQ((std::vector<Key>{{Key::None, 'k'}}), parse_keys("k\033[1;"));
}

TEST(Terminal, WidthSkipsEscapesAndCountsCharacters) {
    EXPECT_EQ(5u, display_width("\033[7mhello\033[0m"));
    EXPECT_EQ(3u, display_width("a\xc2\xb5"
                                "b")); // µ is two bytes, one column
}

TEST(Terminal, CutKeepsEscapesWhole) {
    EXPECT_EQ("hel", cut_to_width("hello", 3));
    EXPECT_EQ("hello", cut_to_width("hello", 10));
    // Cut inside reverse video: the style is reset after the cut.
    EXPECT_EQ("\033[7mhe\033[0m", cut_to_width("\033[7mhello\033[0m", 2));
    // Cut after the styled text: the escapes kept, nothing added.
    EXPECT_EQ("\033[1mab\033[0mc", cut_to_width("\033[1mab\033[0mcd", 3));
    EXPECT_EQ("a\xc2\xb5", cut_to_width("a\xc2\xb5"
                                        "bc",
                                        2));
}
