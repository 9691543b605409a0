"""Found by a second hunt (1205e) of the prompt split (`mask.split_answer`): a `(venv) `
or `(base) ` in front of our own PS1 was taken for output (a silent `cd src` in a
virtualenv became `action`, keep 1.0, where it had been `boilerplate`), and output ending
in a letter or digit right before `root@host:/# ` (docker's default prompt) was swallowed
into the prompt's user name (`OKroot@web:/# `: "a prompt, no output")."""

import pytest
from worldtrace.pipelines.mask import split_answer

SPLITS = [
    ("(venv) user@sandbox:~/proj$ ", ("", "(venv) user@sandbox:~/proj$ ")),
    ("x\n(base) user@sandbox:/srv$ ", ("x\n", "(base) user@sandbox:/srv$ ")),
    ("ok(venv) user@sandbox:~$ ", ("ok", "(venv) user@sandbox:~$ ")),
    ("OKroot@web:/# ", ("OK", "root@web:/# ")),
    ("helloroot@sandbox:/# ", ("hello", "root@sandbox:/# ")),
    ("3.12.1root@3f2a9c1b7d:/app# ", ("3.12.1", "root@3f2a9c1b7d:/app# ")),
    ("root@web:/# ", ("", "root@web:/# ")),
    ("(venv) root@web:/# ", ("", "(venv) root@web:/# ")),
]


@pytest.mark.parametrize("answer, split", SPLITS, ids=[repr(s[0]) for s in SPLITS])
def test_a_venv_before_our_prompt_and_output_before_roots_are_told_apart(answer, split):
    assert split_answer(answer) == split
