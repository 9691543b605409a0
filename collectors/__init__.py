"""Episodes (policies, recorder, jobs, queue), importers and the synthetic test corpus."""

MAX_TURNS_STOP = "stopped at max_turns"
"""Why an episode is `incomplete` with no error: the policy was still acting when the
job's `max_turns` ran out (`episode.run_episode`; an explorer's usual end). Said
(`collect`, `worker`, `jobs show`'s `ending`), not recorded: the outcome stays
`incomplete` with no error. Here, not in `episode`, so the CLI's `progress` reads it
without importing the sandboxes."""


def ending(status: str, error: str | None) -> str | None:
    """How an attempt ended, as `collect`, `worker` and `jobs show`'s `ending` say it: its
    error (a failure's reason, or the sandbox's word for a finished one: `the shell exited
    (status 3)`), or MAX_TURNS_STOP for an `incomplete` outcome without one (the worker
    said `succeeded` with nothing more, like an episode the policy finished)."""
    return MAX_TURNS_STOP if not error and status == "incomplete" else error
