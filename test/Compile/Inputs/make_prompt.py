"""Writes a prompt of token ids: make_prompt.py OUT.npy BATCHxLENGTH [dtype].
Ids are random in [0, 100) with a fixed seed."""
import sys

import numpy as np

batch, length = (int(x) for x in sys.argv[2].split("x"))
dtype = sys.argv[3] if len(sys.argv) > 3 else "int64"
ids = np.random.default_rng(11).integers(0, 100, (batch, length))
np.save(sys.argv[1], ids.astype(dtype))
