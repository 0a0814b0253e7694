import numpy as np
import numpy.typing as npt

import sinpe

pe = sinpe.positional_encoding(5000, 512)
pe2 = sinpe.positional_encoding(100, 64, 500000.0, dtype="float16", backend="mkl", threads=2)
pe3 = sinpe.positional_encoding(d_model=64, positions=np.arange(10))
x = np.zeros((2, 10, 64), np.float32)
y: npt.NDArray[np.float32] = sinpe.add_pe(x, offset=3)
sinpe.add_pe(x, 10000.0, positions=[0, 1, 2, 3, 4, 0, 1, 2, 3, 4])
sinpe.set_backend("builtin")
sinpe.set_kernel("scalar")
sinpe.set_threads(2)
n: int = sinpe.get_threads()
info = sinpe.numerics()
from sinpe import presets

f1 = presets.fairseq(100, 64, 1)
c1, s1 = presets.llama_rope(64, np.arange(10)[None])
q = np.zeros((1, 2, 10, 64), np.float32)
sinpe.apply_rope(q, layout="pairs")
R = sinpe.shift_matrix(3, 64)
fl = presets.flax_sinusoidal_init(2048, 512, dtype="float16")
kr = presets.keras_hub_rotary(np.zeros((2, 16, 4, 64), np.float32), 10000, 2.0, start_index=5)
