"""The reference run for real: OS processes on one SQLite file, killed at random, checked like a simulation.

`runner.py` starts the workers (`reference/stress_worker.py`), sends SIGINT and SIGKILL on a seeded schedule
and restarts what died; `log.py` turns the workers' JSONL logs into one history; `check.py` runs the
simulator's invariants that can judge a real run over that history and the database the processes left.
"""
