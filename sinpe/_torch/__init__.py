"""The torch wing of sinpe, behind its face :mod:`sinpe.torch` (each floor imports only the
floors below it; docs/layout.md draws them):

- the rotation forms: ``graphs`` (transformers' functions restated op for op), ``rotate`` (the
  core's way), ``training`` (the core's forward with autograd's own backward replayed),
  ``forms`` (one form per function, the way chosen per call, ``route``);
- the custom operators: ``operators`` (``torch.ops.sinpe.*``: forms, their backward, lazy
  registration), ``tables`` (``add_pe``, ``to_torch``, ``preset``), ``hf_rope``;
- the patch: ``shadow`` (an attribute standing in for a method), ``compare`` (outputs bit for
  bit), ``recognise`` (transformers' code recognised), ``rotaries`` (which rotary module is
  which), ``forwards`` (the rotary forwards sinpe gives), ``routing`` (rotation functions
  routed through aliases), ``state`` (``Patched``: plain data), ``proof`` (on the instance),
  ``patch`` (patch, unpatch, patched);
- ``module``: the drop-in ``nn.Module``.

Importing any part tells the binding that torch tensors may reach the core.
"""
import torch

from .. import _jobs

_jobs.torch_seen(torch)  # the binding takes torch's C-level export of a tensor from now on
