"""The pure domain: no I/O, no wall clock, no unseeded randomness."""
