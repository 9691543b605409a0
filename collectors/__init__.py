"""Episodes (policies, recorder, jobs, queue), importers and the synthetic test corpus."""
