"""transformers' rotary modules from a model's config, bit for bit: :func:`hf_rope`
(public as :func:`sinpe.presets.hf_rope`).

  families.py  which form each model type's rotary module has (the tables dispatched on)
  config.py    the config as the init functions read it (objects, to_dict() dicts, Mappings)
  inits.py     ROPE_INIT_FUNCTIONS: one init function per rope_type, in float32 steps
  axial.py     the vision towers' axial 2D rope
  rope.py      hf_rope: the forward (positions, regrowth, the cos/sin tables)
"""
from .inits import ROPE_INIT_FUNCTIONS
from .rope import ROPE_TYPES, hf_rope

__all__ = ["hf_rope", "ROPE_INIT_FUNCTIONS", "ROPE_TYPES"]
