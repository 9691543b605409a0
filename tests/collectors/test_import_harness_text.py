"""Harness text in observations: what SWE-agent, mini-swe-agent and Terminus-2 (ATIF)
write around (or instead of) the environment's answer is not the environment's answer.
Each importer keeps what the environment said: an empty output is "", a harness's
truncation notice is `observation.truncated` with the text the agent was shown, a
harness timeout is `[timed out]` after the output so far (an error, `state_json
{"timed_out": true}`), Terminus-2's warnings about the agent's format go to metadata
`format_warnings`. Only the harnesses' exact templates are removed: an environment that
prints something like them keeps its text. Our own fixtures, in the shapes the harnesses
write (SWE-agent 0.x and 1.x `.traj`, mini-swe-agent v1/v2 `.traj.json`, harbor's ATIF)."""

from __future__ import annotations

import json

from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import validate_dict

from .test_import_fidelity import items

TIMED_OUT = {"timed_out": True}


def one(tmp_path, name, data):
    f = tmp_path / name
    f.write_text(json.dumps(data))
    [t], problems = items(f)
    assert validate_dict(t.to_dict()) == []
    return t, problems


def obs(t):
    o = [x.observation for x in t.turns]
    return [(x.text, x.is_error, x.exit_code, x.truncated) for x in o]


def state(t):
    return [json.loads(x.observation.state_json or "null") for x in t.turns]


# -- SWE-agent ---------------------------------------------------------------------

SWE_STATE = '{"open_file": "/repo/a.py", "working_dir": "/repo"}'
# sweagent/agent/agents.py (1.x) TemplateConfig.command_cancelled_timeout_template: the
# step's observation when a command timed out (1.0: without the `Note:` sentence)
TIMEOUT_1X = (
    "The command 'python -m http.server' was cancelled because it took more than 30 seconds."
    " Please try a different command that completes more quickly."
    " Note: A common source of this error is if the command is interactive or requires user"
    " input (it is impossible to receive user input in the current environment, so the command"
    " will never complete)."
)
TIMEOUT_10 = (
    "The command 'sleep 100' was cancelled because it took more than 30 seconds."
    " Please try a different command that completes more quickly."
)


def step(action, observation):
    return {"action": action + "\n", "observation": observation, "thought": "t", "state": SWE_STATE}


def swe(tmp_path, steps):
    data = {"trajectory": steps, "history": [], "info": {"exit_status": "submitted"}}
    return one(tmp_path, "run.traj", data)


def test_swe_agent_1x_timeout_is_a_timeout_not_its_message(tmp_path):
    t, problems = swe(
        tmp_path,
        [
            step("python -m http.server", TIMEOUT_1X),
            step("sleep 100", TIMEOUT_10),
            step("ls", "a.py\n"),
        ],
    )
    assert problems == []
    assert obs(t) == [
        ("[timed out]", True, None, False),
        ("[timed out]", True, None, False),
        ("a.py\n", False, None, False),
    ]
    # the step's own state is kept, the timeout added to it
    assert (
        state(t)[:2] == [{"open_file": "/repo/a.py", "working_dir": "/repo", "timed_out": True}] * 2
    )


def test_swe_agent_0x_timeout_suffixes_keep_the_output_so_far(tmp_path):
    """SWE-agent 0.x (sweagent/environment/swe_env.py `step`) appended its timeout notice to
    the output read so far: "\\nEXECUTION TIMED OUT" (0.x), with " BECAUSE THE COMMAND WAS
    RUNNING FOR MORE THAN N SECONDS." or " BECAUSE NO OUTPUT WAS PRODUCED ..." (0.7), or
    " AND INTERRUPT FAILED. RESTARTING PROCESS."."""
    t, problems = swe(
        tmp_path,
        [
            step("sleep 100", "\nEXECUTION TIMED OUT"),
            step("make", "cc -c a.c\n^C\nEXECUTION TIMED OUT BECAUSE THE COMMAND WAS RUNNING FOR MORE THAN 500 SECONDS."),
            step("tail -f log", "\nEXECUTION TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 30 SECONDS.\n"
                 "PLEASE REFINE YOUR RUNNING COMMAND SO IT WILL PRODUCE OUTPUT IN THE SPECIFIED TIME FRAME."),
            step("vim", "\nEXECUTION TIMED OUT AND INTERRUPT FAILED. RESTARTING PROCESS."),
        ],
    )  # fmt: skip
    assert problems == []
    assert [x.observation.text for x in t.turns] == [
        "[timed out]",
        "cc -c a.c\n^C\n[timed out]",
        "[timed out]",
        "[timed out]",
    ]
    assert all(x.observation.is_error and x.observation.exit_code is None for x in t.turns)
    assert all(s["timed_out"] is True for s in state(t))


def test_swe_agent_text_like_its_templates_is_kept(tmp_path):
    """A program may print words of SWE-agent's notices; only the exact templates in their
    place are SWE-agent's. The no-output template is never in a step's `observation`
    (SWE-agent puts it in the history message only), so a step holding it keeps it."""
    kept = [
        "Your command ran successfully and did not produce any output.",
        "runner: EXECUTION TIMED OUT",  # not on a line of its own
        "\nEXECUTION TIMED OUT after 5s",  # not the notice
        "The command 'x' was cancelled because it took more than 30 seconds.",  # cut short
    ]
    t, _ = swe(
        tmp_path, [step("sleep 100", TIMEOUT_10)] + [step(f"cmd{k}", o) for k, o in enumerate(kept)]
    )
    assert [x.observation.text for x in t.turns] == ["[timed out]", *kept]
    assert [x.observation.is_error for x in t.turns] == [True] + [False] * len(kept)


PROMPT = "\n(Open file: /repo/a.py)\n(Current directory: /repo)\nbash-$"
# sweagent/agent/agents.py (1.x) TemplateConfig.next_step_truncated_observation_template
TRUNCATED_1X = (
    "Observation: {text}<response clipped><NOTE>Observations should not exceeded {cap} characters."
    " {n} characters were elided. Please try a different command that produces less output or"
    " use head/tail/grep/redirect the output to a file. Do not use interactive pagers.</NOTE>"
)


def test_swe_agent_history_templates_are_not_the_observation(tmp_path):
    """From `history` alone the observation is the user message SWE-agent rendered with its
    templates: `next_step_no_output_template` for an empty output (config/default.yaml,
    0.x and 1.x: "Your command ran successfully and did not produce any output."), the
    truncation template for a long one (1.x), the 0.x timeout notice before the prompt."""
    history = [
        {"role": "system", "content": "SETTING: You are an autonomous programmer."},
        {"role": "user", "content": "Fix a.py" + PROMPT},
        {"role": "assistant", "action": "rm tmp.py\n", "thought": "clean"},
        {"role": "user", "content": "Your command ran successfully and did not produce any output." + PROMPT},
        {"role": "assistant", "action": "cat big.log\n", "thought": "read"},
        {"role": "user", "content": TRUNCATED_1X.format(text="0123456789", cap=10, n=5)},
        {"role": "assistant", "action": "cat old.log\n", "thought": "read (1.0 did not cut)"},
        {"role": "user", "content": TRUNCATED_1X.format(text="0123456789abcde", cap=10, n=5)},
        {"role": "assistant", "action": "sleep 100\n", "thought": "wait"},
        {"role": "user", "content": "\nEXECUTION TIMED OUT" + PROMPT},
        {"role": "assistant", "action": "submit\n", "thought": "done"},
    ]  # fmt: skip
    t, problems = one(tmp_path, "hist.traj", {"history": history, "info": {}})
    assert obs(t) == [
        ("", False, None, False),
        ("0123456789", False, None, True),  # what the agent saw; the rest was cut
        ("0123456789abcde", False, None, False),  # the whole output was shown
        ("[timed out]", True, None, False),
    ]
    assert state(t)[0] == {"open_file": "/repo/a.py", "working_dir": "/repo"}
    assert state(t)[3] == {"open_file": "/repo/a.py", "working_dir": "/repo", "timed_out": True}
    assert [p.kind for p in problems] == ["unpaired_call"]  # the final submit, as before


# -- mini-swe-agent ----------------------------------------------------------------

# config/default.yaml, extra/swebench.yaml `action_observation_template`, the branch for
# an output of 10,000 characters or more (v1: under `agent:`, v2: `model.observation_template`)
WARNING = (
    "<warning>\nThe output of your last command was too long.\n"
    "Please try a different command that produces less output.\n"
    "If you're looking at a file you can try use head, tail or sed to view a smaller number of lines selectively.\n"
    "If you're using grep or find and it produced too much output, you can use a more selective search pattern.\n"
    "If you really need to see something from the full command's output, you can redirect output to a file and then search in that file.\n"
    "</warning>"
)
LONG = (
    "<returncode>{rc}</returncode>\n" + WARNING + "<output_head>\n{head}\n</output_head>\n"
    "<elided_chars>\n{n} characters elided\n</elided_chars>\n<output_tail>\n{tail}\n</output_tail>"
)
# `timeout_template` (v1 config/default.yaml, extra/swebench.yaml), both branches
TIMEOUT = (
    "The last command <command>{cmd}</command> timed out and has been killed.\n"
    "The output of the command was:\n{body}\n"
    "Please try another command and make sure to avoid those requiring interactive input."
)
TIMEOUT_LONG_BODY = (
    "<warning>Output was too long and has been truncated.</warning>\n<output_head>\n{head}\n"
    "</output_head>\n<elided_chars>{n} characters elided</elided_chars>\n<output_tail>\n{tail}\n</output_tail>"
)
# v2 (environments/local.py): a timeout is an exception; the model's observation_template
# puts it in <exception> before the return code (-1)
V2_TIMEOUT = (
    "<exception>An error occurred while executing the command: Command 'sleep 100' timed out"
    " after 60 seconds</exception>\n<returncode>-1</returncode>\n<output>\n{out}</output>"
)
FORMAT_ERROR = (
    "Please always provide EXACTLY ONE action in triple backticks, found 0 actions.\n"
    "If you want to end the task, please issue the following command: "
    "`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`\nwithout any other command."
)


def mini(tmp_path, pairs, fmt="mini-swe-agent-1"):
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Please solve this issue: fix a.py"},
    ]
    for command, reply in pairs:
        messages += [
            {"role": "assistant", "content": f"THOUGHT: go.\n\n```bash\n{command}\n```"},
            {"role": "user", "content": reply},
        ]
    data = {"trajectory_format": fmt, "info": {"exit_status": "Submitted"}, "messages": messages}
    return one(tmp_path, "run.traj.json", data)


def test_mini_long_output_template_is_truncation(tmp_path):
    head, tail = "line 1\nline 2", "line 9999\nFAILED test_a"
    t, problems = mini(
        tmp_path,
        [
            ("pytest", LONG.format(rc=1, head=head, n=12345, tail=tail)),
            # the `set` tag's whitespace control differs between configs: a newline may
            # stand between </warning> and <output_head>, and between the other tags
            (
                "cat log",
                LONG.format(rc=0, head=head, n=7, tail=tail).replace("</warning>", "</warning>\n"),
            ),
        ],
    )
    assert problems == []
    assert obs(t) == [
        (f"{head}\n{tail}", True, 1, True),
        (f"{head}\n{tail}", False, 0, True),
    ]


def test_mini_timeouts_long_and_v2(tmp_path):
    t, _ = mini(
        tmp_path,
        [
            (
                "yes",
                TIMEOUT.format(
                    cmd="yes", body=TIMEOUT_LONG_BODY.format(head="y\ny", n=99, tail="y\ny")
                ),
            ),
            ("sleep 100", V2_TIMEOUT.format(out="waiting...\n")),
            ("sleep 1000", V2_TIMEOUT.format(out="")),
        ],
        fmt="mini-swe-agent-1.1",
    )
    assert obs(t) == [
        ("y\ny\ny\ny\n[timed out]", True, None, True),
        ("waiting...\n[timed out]", True, None, False),
        ("[timed out]", True, None, False),
    ]
    assert state(t) == [TIMED_OUT] * 3


def test_mini_format_error_answer_is_no_turn(tmp_path):
    """A message whose only block is not an action block (```python in a ```bash file)
    was rejected by mini-swe-agent: its answer is the format error, no command ran."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Please solve this issue: fix a.py"},
        {"role": "assistant", "content": "Sketch:\n```python\nprint(1)\n```"},
        {"role": "user", "content": FORMAT_ERROR},
        {"role": "assistant", "content": "Now.\n\n```bash\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
    ]
    data = {"trajectory_format": "mini-swe-agent-1", "info": {}, "messages": messages}
    t, problems = one(tmp_path, "fmt.traj.json", data)
    assert problems == []
    assert [(x.action.text, x.observation.text) for x in t.turns] == [("ls", "a.py\n")]


def test_mini_text_like_its_templates_is_kept(tmp_path):
    """An output that holds the words of a notice (a log of an earlier run) is the
    environment's: only a whole message in the template's layout is mini-swe-agent's."""
    printed = "<warning>\nThe output of your last command was too long.\n</warning>"
    t, _ = mini(
        tmp_path,
        [
            ("cat old.log", f"<returncode>0</returncode>\n<output>\n{printed}\n</output>"),
            ("cat big.log", LONG.format(rc=0, head="a", n=1, tail="b")),
            # a timeout notice in another layout keeps its text, as before
            (
                "sleep 9",
                "The last command <command>sleep 9</command> timed out and has been killed.\nbye",
            ),
        ],
    )
    assert obs(t) == [
        (printed + "\n", False, 0, False),  # `<output>\n` + what it printed + `</output>`
        ("a\nb", False, 0, True),
        (
            "The last command <command>sleep 9</command> timed out and has been killed.\nbye",
            True,
            None,
            False,
        ),
    ]


# -- Terminus-2 (harbor ATIF) ------------------------------------------------------


def keys(cid, text):
    args = {"keystrokes": text, "duration": 0.1}
    return {"tool_call_id": cid, "function_name": "bash_command", "arguments": args}


def atif(*results, agent="terminus-2"):
    """A Terminus-2 run whose agent steps each ran `ls` and got one result (a result
    that asks to confirm the completion answers a `mark_task_complete` call)."""
    steps = [
        {"step_id": 1, "source": "system", "message": "You solve command-line tasks."},
        {"step_id": 2, "source": "user", "message": "Create hello.txt"},
    ]
    for k, content in enumerate(results):
        call = keys(f"call_{k}_1", "ls\n")
        if content.startswith("Current terminal state"):
            call = {"tool_call_id": f"call_{k}_task_complete", "function_name": "mark_task_complete", "arguments": {}}  # fmt: skip
        steps.append(
            {"step_id": 3 + k, "source": "agent", "message": f"Plan {k}", "tool_calls": [call],
             "observation": {"results": [{"content": content}]}}
        )  # fmt: skip
    return {"schema_version": "ATIF-v1.5", "session_id": "s", "agent": {"name": agent, "version": "2.0.0"}, "steps": steps}  # fmt: skip


SCREEN = "root@x:/app# ls\nhello.txt\nroot@x:/app# "
WARN = "- Extra text detected before JSON object\n- Extra text detected after JSON object"
CONFIRM = (
    "Current terminal state:\n{screen}\n\nAre you sure you want to mark the task as complete? "
    "This will trigger your solution to be graded and you won't be able to make any further "
    "corrections. If so, include {again} again."
)


def test_terminus_screen_headers_and_warnings(tmp_path):
    t, problems = one(
        tmp_path,
        "trajectory.json",
        atif(
            "New Terminal Output:\n\n" + SCREEN,
            "Current Terminal Screen:\n" + SCREEN,
            f"Previous response had warnings:\nWARNINGS: {WARN}\n\nNew Terminal Output:\n" + SCREEN,
        ),
    )
    assert problems == []
    assert [x.observation.text for x in t.turns] == ["\n" + SCREEN, SCREEN, SCREEN]
    assert json.loads(t.metadata["format_warnings"]) == [{"turn": 2, "warnings": WARN}]


def test_terminus_completion_question_is_not_the_observation(tmp_path):
    t, _ = one(
        tmp_path,
        "trajectory.json",
        atif(
            CONFIRM.format(screen="New Terminal Output:\n" + SCREEN, again='"task_complete": true in your JSON response'),
            CONFIRM.format(screen="Current Terminal Screen:\n" + SCREEN, again="<task_complete>true</task_complete>"),
        ),
    )  # fmt: skip
    assert [(x.action.name, x.observation.text) for x in t.turns] == [
        ("mark_task_complete", SCREEN)
    ] * 2


def limited(text, max_bytes=10000):
    """harbor's Terminus2._limit_output_length, to build a fixture in its shape."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    half = max_bytes // 2
    first, last = data[:half].decode(errors="ignore"), data[-half:].decode(errors="ignore")
    omitted = len(data) - len(first.encode()) - len(last.encode())
    return f"{first}\n[... output limited to {max_bytes} bytes; {omitted} interior bytes omitted ...]\n{last}"


# terminus_2/templates/timeout.txt (Terminus2._execute_commands on a TimeoutError)
TIMEOUT_T2 = (
    "Previous command:\n{cmd}\n\nThe previous command timed out after {secs} seconds\n\n"
    "It is possible that the command is not yet finished executing. If that is the case, then do "
    "nothing. It is also possible that you have entered an interactive shell and should continue "
    "sending keystrokes as normal.\n\nHere is the current state of the terminal:\n\n{screen}"
)


def test_terminus_output_limit_is_truncation_and_timeout_is_a_timeout(tmp_path):
    big = "".join(f"line {k}\n" for k in range(3000))  # about 26 kB
    shown = limited(limited("New Terminal Output:\n" + big))  # Terminus-2 limits twice
    timeout = limited(TIMEOUT_T2.format(cmd="sleep 100\n", secs=60, screen=limited("Current Terminal Screen:\n" + SCREEN)))  # fmt: skip
    t, _ = one(tmp_path, "trajectory.json", atif(shown, timeout))
    [cut, killed] = [x.observation for x in t.turns]
    assert cut.truncated and not cut.is_error
    assert cut.text.startswith("line 0\nline 1\n") and cut.text.endswith("line 2999\n")
    assert "output limited to" not in cut.text and len(cut.text) < 10_100
    assert (killed.text, killed.is_error, killed.exit_code) == (
        SCREEN + "\n[timed out]",
        True,
        None,
    )
    assert json.loads(killed.state_json) == TIMED_OUT


def test_terminus_like_text_is_kept(tmp_path):
    """Only Terminus-2's own templates, whole and in their place, are removed: another
    agent's results, or text like a header a program printed, are kept."""
    odd = [
        "New Terminal Output: " + SCREEN,  # not the header line
        SCREEN
        + "\n[... output limited to 10000 bytes; 5 interior bytes omitted ...]\n$ ",  # not at the cut
        "Previous response had warnings:\nWARNINGS: - x\n\n" + SCREEN,  # no screen header after
    ]
    t, _ = one(tmp_path, "trajectory.json", atif("New Terminal Output:\n" + SCREEN, *odd))
    assert [x.observation.text for x in t.turns] == [SCREEN, *odd]
    assert "format_warnings" not in t.metadata
    assert not any(x.observation.truncated for x in t.turns)
    other, _ = one(
        tmp_path, "trajectory.json", atif("New Terminal Output:\n" + SCREEN, agent="claude-code")
    )
    assert other.turns[0].observation.text == "New Terminal Output:\n" + SCREEN


def test_import_counts_no_cap_for_a_harness_truncation(tmp_path):
    """A harness's truncation is the source's: flagged, not counted as our cap's cut."""
    f = tmp_path / "run.traj.json"
    t, _ = mini(tmp_path, [("pytest", LONG.format(rc=1, head="h", n=10, tail="t"))])
    r = import_paths([f], tmp_path / "out")
    assert r.imported["mini-swe-agent"] == 1 and r.warnings["truncated_observation"] == 0
    assert t.turns[0].observation.truncated
