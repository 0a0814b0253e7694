/* Verification records of the built-in kernel paths (internal).
 *
 * A vector path is chosen automatically by the CPU probe only when its exhaustive check has
 * passed: `tools/exhaustive sin --kernel PATH` and `cos` over all 2^32 float inputs, 0
 * results different from the scalar kernel (itself 0 differences from MPFR).  Until then
 * it can still be forced (SINPE_KERNEL=PATH, sinpe.set_kernel) for testing.
 *
 * Records (function, path, CPU, date, result, command):
 *   sin avx2    earlier session's CPU (README table)  0 wrong of 4294967296, 186 s
 *   cos avx2    earlier session's CPU (README table)  0 wrong of 4294967296, 182 s
 *   sin avx512  AMD EPYC family 26 (Zen 5, AVX-512F/DQ/BW/VL), 2026-12-01:
 *               0 wrong of 4294967296 (66 sent to MPFR, 878 slow paths), 150 s, 2 threads
 *   cos avx512  same CPU and date: 0 wrong of 4294967296 (66 to MPFR, 878 slow), 160 s
 *   sin avx512  again after the sign fix-up became ternary logic (same CPU and date):
 *               0 wrong of 4294967296 (66 to MPFR, 878 slow), 101 s, 2 threads
 *   cos avx512  the same: 0 wrong of 4294967296 (66 to MPFR, 878 slow), 134 s
 * (commands: make -C tools exhaustive && tools/exhaustive sin --kernel avx512, and cos)
 */
#ifndef SINPE_VERIFIED_H
#define SINPE_VERIFIED_H

#define SINPE_VERIFIED_AVX2 1
#define SINPE_VERIFIED_AVX512 1

#endif
