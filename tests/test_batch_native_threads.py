"""A run whose driver has used torch's thread pool still runs on several workers (no fork deadlock)."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

AGENT_MODULE = textwrap.dedent('''
    import torch

    from gauntlet.agent import Agent


    class TorchPolicyAgent(Agent):
        """A small torch policy that votes over noisy copies of the observation. Building it runs a
        warm-up batch (which starts torch's OpenMP pool), as checkpointed agents do when they load;
        each action runs a batch large enough for torch to parallelise."""

        name = "torch-policy"

        def __init__(self):
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                           torch.nn.ReLU(), torch.nn.Linear(512, 2))
            self._vote(torch.zeros(4))

        def _vote(self, observation):
            with torch.no_grad():
                batch = observation.reshape(1, -1) + 0.01 * torch.randn(256, observation.numel())
                return int(self.net(batch).argmax(dim=1).float().mean().round())

        def act(self, observation, info):
            return self._vote(torch.as_tensor(observation, dtype=torch.float32))
''')

DRIVER = textwrap.dedent('''
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))

    from gauntlet.registry import registry

    registry.add("agent", "torch-policy", "torch_policy_agent:TorchPolicyAgent")

    if __name__ == "__main__":
        from gauntlet.batch import RunSpec, run_many
        from gauntlet.episode import AgentSpec
        from gauntlet.registry import make_agent

        make_agent("torch-policy")  # what `gauntlet run` does to check the agent's config
        spec = RunSpec(env_id="CartPole-v1", agent=AgentSpec(name="torch-policy"), max_steps=20)
        result = run_many(spec, 4, sys.argv[1], workers=2, progress=False)
        print(result.ran)
''')


def test_run_of_a_torch_agent_on_two_workers_finishes_after_the_driver_used_torch(tmp_path):
    (tmp_path / "torch_policy_agent.py").write_text(AGENT_MODULE)
    (tmp_path / "drive.py").write_text(DRIVER)
    out = tmp_path / "run"
    # A deadlocked worker never returns: the timeout turns a hang into a failure, and the whole
    # process group goes with it so no stuck worker outlives the test.
    driver = subprocess.Popen([sys.executable, str(tmp_path / "drive.py"), str(out)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True)
    try:
        stdout, stderr = driver.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.communicate()
        pytest.fail("the run hung: its workers never finished")
    assert driver.returncode == 0, stderr[-2000:]
    assert stdout.split() == ["4"]
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(episode["index"] for episode in summary["episodes"]) == [0, 1, 2, 3]
