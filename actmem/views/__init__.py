"""What a learner sees: figures, widgets, tables and the command line. Only
calls :mod:`actmem.layer` and :mod:`actmem.run`; never computes a byte itself."""
