// The full-screen view's keys and line cutting (lib/cli/terminal.h).
#include <gtest/gtest.h>

#include "cli/terminal.h"

// After gtest: curses.h's macros (OK, ERR, move, ...) are not for it.
#include <curses.h>

using namespace memlat;

TEST(Terminal, KeysOfCurses) {
    EXPECT_EQ((Key{Key::None, 'q'}), key_of('q'));
    EXPECT_EQ((Key{Key::None, '<'}), key_of('<'));
    EXPECT_EQ((Key{Key::Up}), key_of(KEY_UP));
    EXPECT_EQ((Key{Key::PageDown}), key_of(KEY_NPAGE));
    EXPECT_EQ((Key{Key::Home}), key_of(KEY_HOME));
    // Enter as the terminal sends it (CR with nonl()), LF, or the keypad's.
    EXPECT_EQ((Key{Key::Enter}), key_of('\r'));
    EXPECT_EQ((Key{Key::Enter}), key_of('\n'));
    EXPECT_EQ((Key{Key::Enter}), key_of(KEY_ENTER));
    // Backspace as DEL, ^H, or the terminfo key.
    EXPECT_EQ((Key{Key::Backspace}), key_of(0x7f));
    EXPECT_EQ((Key{Key::Backspace}), key_of(KEY_BACKSPACE));
    EXPECT_EQ((Key{Key::Escape}), key_of(27));
    EXPECT_EQ((Key{Key::Resize}), key_of(KEY_RESIZE));
    // Keys the view does not use: nothing.
    EXPECT_EQ(Key{}, key_of(KEY_F(5)));
    EXPECT_EQ(Key{}, key_of(1)); // Ctrl-A
}

TEST(Terminal, CutKeepsStyleMarksWhole) {
    EXPECT_EQ("hel", cut_to_width("hello", 3));
    EXPECT_EQ("hello", cut_to_width("hello", 10));
    // Cut inside reverse video: the style is reset after the cut.
    EXPECT_EQ("\033[7mhe\033[0m", cut_to_width("\033[7mhello\033[0m", 2));
    // Cut after the styled text: the marks kept, nothing added.
    EXPECT_EQ("\033[1mab\033[0mc", cut_to_width("\033[1mab\033[0mcd", 3));
    EXPECT_EQ("a\xc2\xb5", cut_to_width("a\xc2\xb5"
                                        "bc",
                                        2));
}
