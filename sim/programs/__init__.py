"""Any program under the simulator: what `sim.explore` can run, its search, its failures and their shrinking."""
