"""The core of a simulated run: the World, its trace, the frozen wall clock, the collector's batch, the loop over
seeds every search shares, and how a command stops (with the child processes it started)."""
