/* Log2 histogram layout shared by the BPF programs and the C++ front-ends.
 * Slot 0 holds the values 0 and 1; slot i > 0 holds [2^i, 2^(i+1) - 1]. */
#ifndef MEMLAT_HIST_H
#define MEMLAT_HIST_H

#define MEMLAT_HIST_SLOTS 32

#endif
