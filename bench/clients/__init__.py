"""Load generators, one module per system, all with the same modes (see __main__)."""
