/* The code paths' verification records, one table for all paths, one row per check
 * (paths/path.h: sinpe_verification): tools/exhaustive over every float32 input against
 * MPFR or the scalar kernel, and for neon tools/crosscheck under qemu-aarch64 (no run on
 * Arm hardware: every 251st pattern of sin and cos, and tables, give the x86-64 build's
 * bits; the registry picks neon because it is the only vector path there, docs/numerics.md).
 * A path's rows are in the order they were measured; the registry reads them
 * (sinpe_paths_record) and chooses a vector path by itself only when its sin and cos rows
 * show 0 wrong. */
#include "paths/path.h"

/* The machines, dates and input counts the rows share. */
#define ALL 4294967296u        /* every float32 input: 2^32 */
#define EVERY_251ST 17111424u  /* every 251st of them */
#define EARLIER "before 2026-12-01"
#define DEC01 "2026-12-01"
#define BODY_H "2026-12-02 (loops from paths/body.h)"
#define SINCOS_H "2026-12-07 (sin/cos from paths/sincos_body.h; 2 cores shared with a CI run)"
#define OLD_X86 "an earlier project machine (x86-64)"
#define OLD_AVX2 "an earlier project machine (x86-64, AVX2 + FMA)"
#define ZEN5 "AMD EPYC family 26 (Zen 5, AVX-512F/DQ/BW/VL)"
#define ZEN4 "AMD EPYC family 25 (Zen 4, AVX-512F/DQ/BW/VL)"
#define QEMU "qemu-aarch64 7.2 on AMD EPYC (crosscheck, every 251st pattern)"

#define SCALAR SINPE_PATH_SCALAR
#define AVX2 SINPE_PATH_AVX2
#define AVX512 SINPE_PATH_AVX512
#define NEON SINPE_PATH_NEON

/* path, func, cpu, date, inputs, wrong, seconds (at 2 threads), command */
static const sinpe_verification RECORDS[] = {
    { SCALAR, "exp", OLD_X86, EARLIER, ALL, 0, 30, "tools/exhaustive exp" },
    { SCALAR, "sin", OLD_X86, EARLIER, ALL, 0, 193, "tools/exhaustive sin" },
    { SCALAR, "cos", OLD_X86, EARLIER, ALL, 0, 220, "tools/exhaustive cos" },
    { SCALAR, "exp", ZEN5, BODY_H, ALL, 0, 30.9, "tools/exhaustive exp" },
    { SCALAR, "sin", ZEN5, BODY_H, ALL, 0, 130.7, "tools/exhaustive sin --kernel scalar" },
    { SCALAR, "cos", ZEN5, BODY_H, ALL, 0, 133.6, "tools/exhaustive cos --kernel scalar" },
    { AVX2, "sin", OLD_AVX2, EARLIER, ALL, 0, 186, "tools/exhaustive sin --kernel avx2" },
    { AVX2, "cos", OLD_AVX2, EARLIER, ALL, 0, 182, "tools/exhaustive cos --kernel avx2" },
    { AVX2, "sin", ZEN5, BODY_H, ALL, 0, 155.6, "tools/exhaustive sin --kernel avx2" },
    { AVX2, "cos", ZEN5, BODY_H, ALL, 0, 180.1, "tools/exhaustive cos --kernel avx2" },
    { AVX2, "sin", ZEN4, SINCOS_H, ALL, 0, 941.8, "tools/exhaustive sin --kernel avx2" },
    { AVX2, "cos", ZEN4, SINCOS_H, ALL, 0, 610.9, "tools/exhaustive cos --kernel avx2" },
    { AVX512, "sin", ZEN5, DEC01, ALL, 0, 101, "tools/exhaustive sin --kernel avx512" },
    { AVX512, "cos", ZEN5, DEC01, ALL, 0, 134, "tools/exhaustive cos --kernel avx512" },
    { AVX512, "sin", ZEN5, BODY_H, ALL, 0, 116.8, "tools/exhaustive sin --kernel avx512" },
    { AVX512, "cos", ZEN5, BODY_H, ALL, 0, 173.4, "tools/exhaustive cos --kernel avx512" },
    { AVX512, "sin", ZEN4, SINCOS_H, ALL, 0, 381.3, "tools/exhaustive sin --kernel avx512" },
    { AVX512, "cos", ZEN4, SINCOS_H, ALL, 0, 855.6, "tools/exhaustive cos --kernel avx512" },
    { NEON, "sin", QEMU, DEC01, EVERY_251ST, 0, 0, "make -C tools check-arm64" },
    { NEON, "cos", QEMU, DEC01, EVERY_251ST, 0, 0, "make -C tools check-arm64" },
};

const sinpe_verification *sinpe_records_nth(int p, int k)
{
    for (size_t i = 0; i < sizeof RECORDS / sizeof RECORDS[0]; i++)
        if (RECORDS[i].path == p && k-- == 0)
            return &RECORDS[i];
    return NULL;
}
