"""The backends: their records (records.py: the core's backends as data, their libraries
loaded once, the SLEEF profiles), the policy (policy.py: which backend 'auto' means, a call's
options, the process's defaults), and where their libraries are (mkl.py, torchlib.py)."""
