import numpy as np

import sinpe

x = np.zeros((2, 10, 64), np.float32)
sinpe.positional_encoding("5000", 512)  # E: str is not an integer
sinpe.positional_encoding(5000, 512, backend="fast")  # E: unknown backend
sinpe.add_pe(x, offset=1.5)  # E: float offset
sinpe.set_backend("tpu")  # E: unknown backend
sinpe.set_kernel("sse9")  # E: unknown kernel
sinpe.set_threads("2")  # E: str threads
s: str = sinpe.get_threads()  # E: int is not str
