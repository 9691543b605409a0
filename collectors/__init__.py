"""Episodes (policies, recorder, jobs, queue), importers and the synthetic test corpus."""

MAX_TURNS_STOP = "stopped at max_turns"
"""Why an episode is `incomplete` with no error: the policy was still acting when the
job's `max_turns` ran out (`episode.run_episode`; an explorer's usual end). Said
(`collect`, `worker`, `jobs show`'s `ending`), not recorded: the outcome stays
`incomplete` with no error. Here, not in `episode`, so the CLI's `progress` reads it
without importing the sandboxes."""
