"""GPU validation: the evidence schema, the suite digest, the probe, the run, the gate, signatures."""
