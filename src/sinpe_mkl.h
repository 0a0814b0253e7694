/* Internal: the oneMKL backend's elementwise entry (pure C). */
#ifndef SINPE_MKL_H
#define SINPE_MKL_H
#include <stddef.h>
#include "sinpe_core.h"
/* func 0 exp, 1 sin, 2 cos of the library's VML.  SINPE_E_BACKEND when not loaded. */
int sinpe_vml_map(sinpe_vml lib, int func, const float *in, float *out, size_t n);
#endif
