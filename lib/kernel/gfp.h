// GFP flags decoded to names. The bit of each flag comes from the running kernel's BTF (the
// ___GFP_*_BIT enum of Linux 6.9 and later); older kernels get the Linux 5.15-6.8 layout.
// Composite names (GFP_KERNEL, ...) are built from those bits, largest first, as the kernel's
// own tracepoint output shows them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace memlat {

class GfpNames {
  public:
    // Bit number -> flag name ("__GFP_IO").
    explicit GfpNames(std::map<int, std::string> bits, std::string source);
    static GfpNames from_kernel();
    // The layout of Linux 5.15 to 6.8, where the bits were macros and not in BTF.
    static GfpNames builtin();

    // "GFP_KERNEL|__GFP_ZERO"; "none" for 0; unknown bits as "0x...".
    std::string decode(uint64_t flags) const;
    // Where the bit numbers came from, for -v.
    const std::string &source() const { return source_; }
    // Bit number -> flag name: the names decode() gives the bits no composite covers.
    const std::map<int, std::string> &bits() const { return bits_; }

  private:
    uint64_t mask_of(std::string_view name) const;
    std::map<int, std::string> bits_;
    std::string source_;
};

} // namespace memlat
