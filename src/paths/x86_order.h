/* a + b and a * b with b as the first source operand, whose NaN x86 keeps when both are NaN,
 * as torch's vector loops do: an intrinsic does not fix the order (the compiler may commute
 * its operands; paths/body.h, "Which NaN"), inline assembly does.  Included by a vector path
 * file after it defines TARGET:
 *   X86_ORDERED_OPS(prefix, vector type, asm constraint)   -> prefix_oadd, prefix_omul */
#ifndef SINPE_PATHS_X86_ORDER_H
#define SINPE_PATHS_X86_ORDER_H

#define X86_ORDERED_OP(name, insn, T, C)                                                    \
    TARGET static inline T name(T a, T b)                                                   \
    {                                                                                       \
        T r;                                                                                \
        __asm__(insn " %1, %2, %0" : "=" C(r) : C(a), C(b));                                \
        return r;                                                                           \
    }

#define X86_ORDERED_OPS(prefix, T, C)                                                       \
    X86_ORDERED_OP(prefix##_oadd, "vaddps", T, C)                                           \
    X86_ORDERED_OP(prefix##_omul, "vmulps", T, C)

#endif
